//! The rules the optimiser knows, by name: statement rules (a rewrite of one
//! statement into one of its operands or a constant), block rules (a rewrite
//! of one block's terminator), passes (a rewrite of whole functions), and
//! groups (the left choice of their members). docs/optimise.md lists each
//! rule with its exact conditions.
//!
//! Assumes the functions rules look at verify. Guarantees: a statement rule's
//! replacement has the type of the statement's result and is available
//! wherever the result was (an operand of the statement, an operand of a
//! statement that dominates it, or a constant); a block rule and a pass leave
//! a function that verifies. Every name is kebab-case and unique across
//! rules, groups and passes.

pub mod branch_fold;
pub mod copyprop;
pub mod cse;
pub mod dce;
pub mod fold;
pub mod identities;
pub mod licm;
pub mod memfwd;
pub mod phi_simplify;

use super::Subst;
use irad_ir::{Func, FuncId, Inst, InstKind, Module, Operand, Prim};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::sync::OnceLock;

/// What a statement rule sees: the function (with the statement's own
/// operands already substituted) and the pending substitution, through which
/// operands of other statements must be read ([`StmtCtx::def`]).
pub struct StmtCtx<'a> {
    /// The function.
    pub func: &'a Func,
    /// Replacements made in this function and not yet written back.
    pub subst: &'a Subst,
}

impl StmtCtx<'_> {
    /// The primitive call defining `op`, with its operands substituted, if
    /// `op` is the result of a primitive call.
    pub fn def(&self, op: Operand) -> Option<(Prim, SmallVec<[Operand; 4]>)> {
        let Operand::Value(v) = op else {
            return None;
        };
        let irad_ir::ValueDef::Inst(inst) = self.func.values.get(v)?.def else {
            return None;
        };
        match &self.func.insts.get(inst)?.kind {
            InstKind::Prim { prim, args } => {
                Some((*prim, args.iter().map(|&a| self.subst.resolve(a)).collect()))
            }
            _ => None,
        }
    }

    /// The kind of statement `inst`.
    pub fn kind(&self, inst: Inst) -> Option<&InstKind> {
        self.func.insts.get(inst).map(|d| &d.kind)
    }
}

/// A statement rule: the operand that replaces the statement's result, or
/// `None` where the rule does not apply (it fails).
pub type StmtRule = fn(&StmtCtx<'_>, Inst) -> Option<Operand>;

/// A pass over the functions `funcs` of a module; `whole` says the pass runs
/// at the module position (it may then use facts about the whole module).
/// Returns whether it changed anything.
pub type PassFn = fn(&mut Module, &[FuncId], bool) -> bool;

/// What a named rule does.
#[derive(Copy, Clone)]
pub enum RuleKind {
    /// Rewrites one statement; applies at statement positions.
    Stmt(StmtRule),
    /// Rewrites one block's terminator; applies at block positions.
    Block(fn(&mut Func, irad_ir::Block) -> bool),
    /// Rewrites whole functions; applies at the module position (every
    /// function in scope) and at function positions.
    Pass(PassFn),
    /// The left choice of these rules, in order.
    Group(&'static [&'static str]),
}

/// A named rule. Rules are equal when their names are (names are unique).
pub struct Rule {
    /// The kebab-case name schedules and `irad dump` use.
    pub name: &'static str,
    /// What it does.
    pub kind: RuleKind,
    /// One line on what it does.
    pub doc: &'static str,
    /// For a statement rule that can only rewrite calls of one primitive,
    /// that primitive: the engine does not try the rule at other statements
    /// (it would fail there). `None`: any statement (and any other kind).
    pub at: Option<Prim>,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Rule) -> bool {
        self.name == other.name
    }
}

impl Eq for Rule {}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every rule, group and pass, each once.
pub static RULES: &[Rule] = &[
    Rule {
        name: "fold",
        at: None,
        kind: RuleKind::Stmt(fold::fold),
        doc: "a primitive call on constants becomes its value, unless it fails at run time",
    },
    Rule {
        name: "identities",
        at: None,
        kind: RuleKind::Group(identities::IDENTITIES),
        doc: "exact algebraic identities (IEEE-safe)",
    },
    Rule {
        name: "fast-identities",
        at: None,
        kind: RuleKind::Group(identities::FAST_IDENTITIES),
        doc: "identities that are wrong for some IEEE values (opt-in)",
    },
    Rule {
        name: "mul-one",
        at: Some(Prim::Mul),
        kind: RuleKind::Stmt(identities::mul_one),
        doc: "mul(x, 1.0), mul(1.0, x) -> x",
    },
    Rule {
        name: "div-one",
        at: Some(Prim::Div),
        kind: RuleKind::Stmt(identities::div_one),
        doc: "div(x, 1.0) -> x",
    },
    Rule {
        name: "sub-zero",
        at: Some(Prim::Sub),
        kind: RuleKind::Stmt(identities::sub_zero),
        doc: "sub(x, 0.0) -> x",
    },
    Rule {
        name: "add-neg-zero",
        at: Some(Prim::Add),
        kind: RuleKind::Stmt(identities::add_neg_zero),
        doc: "add(x, -0.0), add(-0.0, x) -> x",
    },
    Rule {
        name: "neg-neg",
        at: Some(Prim::Neg),
        kind: RuleKind::Stmt(identities::neg_neg),
        doc: "neg(neg(x)) -> x",
    },
    Rule {
        name: "select-same",
        at: Some(Prim::Select),
        kind: RuleKind::Stmt(identities::select_same),
        doc: "select(c, a, a) -> a",
    },
    Rule {
        name: "iadd-zero",
        at: Some(Prim::Iadd),
        kind: RuleKind::Stmt(identities::iadd_zero),
        doc: "iadd(x, 0), iadd(0, x) -> x",
    },
    Rule {
        name: "isub-zero",
        at: Some(Prim::Isub),
        kind: RuleKind::Stmt(identities::isub_zero),
        doc: "isub(x, 0) -> x",
    },
    Rule {
        name: "imul-one",
        at: Some(Prim::Imul),
        kind: RuleKind::Stmt(identities::imul_one),
        doc: "imul(x, 1), imul(1, x) -> x",
    },
    Rule {
        name: "imul-zero",
        at: Some(Prim::Imul),
        kind: RuleKind::Stmt(identities::imul_zero),
        doc: "imul(x, 0), imul(0, x) -> 0",
    },
    Rule {
        name: "idiv-one",
        at: Some(Prim::Idiv),
        kind: RuleKind::Stmt(identities::idiv_one),
        doc: "idiv(x, 1) -> x",
    },
    Rule {
        name: "ineg-ineg",
        at: Some(Prim::Ineg),
        kind: RuleKind::Stmt(identities::ineg_ineg),
        doc: "ineg(ineg(x)) -> x",
    },
    Rule {
        name: "not-not",
        at: Some(Prim::Not),
        kind: RuleKind::Stmt(identities::not_not),
        doc: "not(not(b)) -> b",
    },
    Rule {
        name: "and-true",
        at: Some(Prim::And),
        kind: RuleKind::Stmt(identities::and_true),
        doc: "and(b, true), and(true, b) -> b",
    },
    Rule {
        name: "and-false",
        at: Some(Prim::And),
        kind: RuleKind::Stmt(identities::and_false),
        doc: "and(b, false), and(false, b) -> false",
    },
    Rule {
        name: "or-false",
        at: Some(Prim::Or),
        kind: RuleKind::Stmt(identities::or_false),
        doc: "or(b, false), or(false, b) -> b",
    },
    Rule {
        name: "or-true",
        at: Some(Prim::Or),
        kind: RuleKind::Stmt(identities::or_true),
        doc: "or(b, true), or(true, b) -> true",
    },
    Rule {
        name: "add-zero",
        at: Some(Prim::Add),
        kind: RuleKind::Stmt(identities::add_zero),
        doc: "add(x, 0.0), add(0.0, x) -> x (fast: wrong for x = -0.0)",
    },
    Rule {
        name: "mul-zero",
        at: Some(Prim::Mul),
        kind: RuleKind::Stmt(identities::mul_zero),
        doc: "mul(x, 0.0), mul(0.0, x) -> 0.0 (fast: wrong for NaN, inf, negative x)",
    },
    Rule {
        name: "sub-self",
        at: Some(Prim::Sub),
        kind: RuleKind::Stmt(identities::sub_self),
        doc: "sub(x, x) -> 0.0 (fast: wrong for NaN and inf)",
    },
    Rule {
        name: "copyprop",
        at: None,
        kind: RuleKind::Group(copyprop::COPYPROP),
        doc: "values forwarded through the constructions that hold them",
    },
    Rule {
        name: "getfield-tuple",
        at: Some(Prim::Getfield),
        kind: RuleKind::Stmt(copyprop::getfield_tuple),
        doc: "getfield(tuple(a0, ..., an), k) -> ak",
    },
    Rule {
        name: "primal-dual",
        at: Some(Prim::Primal),
        kind: RuleKind::Stmt(copyprop::primal_dual),
        doc: "primal(dual(p, t...)) -> p",
    },
    Rule {
        name: "tangent-dual",
        at: Some(Prim::Tangent),
        kind: RuleKind::Stmt(copyprop::tangent_dual),
        doc: "tangent(dual(p, t0, ..., tn), k) -> tk",
    },
    Rule {
        name: "dual-eta",
        at: Some(Prim::Dual),
        kind: RuleKind::Stmt(copyprop::dual_eta),
        doc: "dual(primal(d), tangent(d, 0), ..., tangent(d, N-1)) -> d",
    },
    Rule {
        name: "select-const",
        at: Some(Prim::Select),
        kind: RuleKind::Stmt(copyprop::select_const),
        doc: "select(true, a, b) -> a; select(false, a, b) -> b",
    },
    Rule {
        name: "phi-simplify",
        at: None,
        kind: RuleKind::Stmt(phi_simplify::phi_simplify),
        doc: "a phi whose entries all carry one operand (or the phi) -> that operand",
    },
    Rule {
        name: "branch-fold",
        at: None,
        kind: RuleKind::Block(branch_fold::branch_fold),
        doc: "gotoifnot on a constant, switch on a constant index in range -> goto",
    },
    Rule {
        name: "dce",
        at: None,
        kind: RuleKind::Pass(dce::dce),
        doc: "unreachable blocks, unused pure statements, and (whole module) dead tapes removed",
    },
    Rule {
        name: "cse",
        at: None,
        kind: RuleKind::Pass(cse::cse),
        doc: "a pure call equal to one that dominates it is replaced by that one",
    },
    Rule {
        name: "memfwd",
        at: None,
        kind: RuleKind::Pass(memfwd::memfwd),
        doc: "array reads of an element the block knows replaced by its value; writes a later write covers removed",
    },
    Rule {
        name: "licm",
        at: None,
        kind: RuleKind::Pass(licm::licm),
        doc: "loop-invariant pure statements hoisted into the loop's preheader",
    },
    Rule {
        name: "inline",
        at: None,
        kind: RuleKind::Pass(inline),
        doc: "calls of small non-recursive functions replaced by their bodies (docs/pe.md)",
    },
    Rule {
        name: "unroll",
        at: None,
        kind: RuleKind::Pass(unroll),
        doc: "loops with a small trip count known at compile time fully unrolled (docs/pe.md)",
    },
    Rule {
        name: "devirtualise",
        at: None,
        kind: RuleKind::Pass(devirtualise),
        doc: "calls through a known function value made static calls (docs/pe.md)",
    },
    Rule {
        name: "merge-blocks",
        at: None,
        kind: RuleKind::Pass(merge_blocks),
        doc: "a block merged into its predecessor when that ends in the only goto to it",
    },
];

/// The partial evaluator's `merge_blocks` over the functions in scope.
fn merge_blocks(m: &mut Module, funcs: &[FuncId], _whole: bool) -> bool {
    let mut changed = false;
    for &f in funcs {
        if let Some(func) = m.get_mut(f) {
            changed |= crate::pe::merge_blocks(func);
        }
    }
    changed
}

/// The partial evaluator's `inline` (docs/pe.md) over the functions in scope.
fn inline(m: &mut Module, funcs: &[FuncId], _whole: bool) -> bool {
    let limits = crate::pe::Limits::default();
    let mut changed = false;
    for &f in funcs {
        changed |= crate::pe::inline_into(m, f, &limits);
    }
    changed
}

/// The partial evaluator's `unroll` (docs/pe.md) over the functions in scope.
fn unroll(m: &mut Module, funcs: &[FuncId], _whole: bool) -> bool {
    let limits = crate::pe::Limits::default();
    let mut changed = false;
    for &f in funcs {
        if let Some(func) = m.get_mut(f) {
            changed |= crate::pe::unroll_func(func, &limits);
        }
    }
    changed
}

/// The partial evaluator's `devirtualise` (docs/pe.md) over the functions in
/// scope.
fn devirtualise(m: &mut Module, funcs: &[FuncId], _whole: bool) -> bool {
    let mut changed = false;
    for &f in funcs {
        if let Some(func) = m.get_mut(f) {
            changed |= crate::pe::devirtualise_func(func);
        }
    }
    changed
}

/// The rule called `name`.
pub fn find_rule(name: &str) -> Option<&'static Rule> {
    resolved(name).map(|(rule, _)| *rule)
}

/// The rule called `name` and, for a group, its member rules: looked up in a
/// table built once, since the engine looks rules up at every position.
pub(crate) fn resolved(name: &str) -> Option<&'static (&'static Rule, Vec<&'static Rule>)> {
    static TABLE: OnceLock<HashMap<&'static str, (&'static Rule, Vec<&'static Rule>)>> =
        OnceLock::new();
    TABLE
        .get_or_init(|| {
            RULES
                .iter()
                .map(|r| {
                    let members = match r.kind {
                        RuleKind::Group(names) => names
                            .iter()
                            .filter_map(|n| RULES.iter().find(|m| m.name == *n))
                            .collect(),
                        _ => Vec::new(),
                    };
                    (r.name, (r, members))
                })
                .collect()
        })
        .get(name)
}

/// Every name a schedule may use besides the combinators.
pub fn known_names() -> Vec<&'static str> {
    let mut names = vec!["id", "fail"];
    names.extend(RULES.iter().map(|r| r.name));
    names
}

/// Whether a call of `prim` has no effect, cannot fail at run time, and
/// gives a result that depends on its operands only: such a call may be
/// removed when unused and moved to where its operands are available.
pub fn is_pure(prim: Prim) -> bool {
    use Prim::*;
    !matches!(
        prim,
        // Can fail at run time.
        Idiv | Irem | Fptosi | Alloc | Zeros | Copy | Arrayref | Frule | Revfwd | Revback
        // Effects, or fresh identity.
        | Arrayset | Push | Pop
        // Read or write arrays, and check shapes.
        | Sum | Dot | Axpy | Scale | Matvec | Matmul | Fill | Copyto | Gemm
        | Ssum | Sdot | Sfill | Sgemma | Sgemmb
    )
}

/// Whether two calls of `prim` with equal operands give equal results (or
/// the same error): pure calls, and the ones that may fail but read no state.
pub fn is_deterministic(prim: Prim) -> bool {
    is_pure(prim) || matches!(prim, Prim::Idiv | Prim::Irem | Prim::Fptosi)
}

/// The operands of a primitive call at `inst`, if it calls `prim`.
pub(crate) fn prim_args<'a>(cx: &'a StmtCtx<'_>, inst: Inst, prim: Prim) -> Option<&'a [Operand]> {
    match cx.kind(inst)? {
        InstKind::Prim { prim: p, args } if *p == prim => Some(args.as_slice()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irad_ir::text::parse_module;

    /// A rule limited to one primitive ([`Rule::at`]) rewrites only calls of
    /// it: checked on the inputs of the filetests of the statement rules,
    /// where each such rule applies at least once (so a wrong primitive is
    /// seen: the rule then applies where the engine would not try it).
    #[test]
    fn rules_limited_to_a_primitive_apply_only_to_its_calls() {
        let sources = [
            include_str!("../../../../tests/filetests/optimise/identities.ir"),
            include_str!("../../../../tests/filetests/optimise/fast_identities.ir"),
            include_str!("../../../../tests/filetests/optimise/copyprop.ir"),
            include_str!("../../../../tests/filetests/optimise/fold.ir"),
            include_str!("../../../../tests/filetests/optimise/phi_simplify.ir"),
        ];
        let subst = Subst::default();
        let mut applied: Vec<&str> = Vec::new();
        for src in sources {
            let m = parse_module(src).expect("filetest input parses");
            for (_, func) in m.funcs() {
                let cx = StmtCtx {
                    func,
                    subst: &subst,
                };
                for &b in &func.layout {
                    for &inst in &func.blocks[b].insts {
                        let prim = match &func.insts[inst].kind {
                            InstKind::Prim { prim, .. } => Some(*prim),
                            _ => None,
                        };
                        for r in RULES {
                            let RuleKind::Stmt(run) = r.kind else {
                                continue;
                            };
                            if run(&cx, inst).is_some() {
                                applied.push(r.name);
                                if let Some(p) = r.at {
                                    assert_eq!(prim, Some(p), "{} applies at {inst:?}", r.name);
                                }
                            }
                        }
                    }
                }
            }
        }
        for r in RULES.iter().filter(|r| r.at.is_some()) {
            assert!(applied.contains(&r.name), "{} never applies", r.name);
            assert!(matches!(r.kind, RuleKind::Stmt(_)), "{}", r.name);
        }
    }

    #[test]
    fn names_are_unique_kebab_case_and_groups_name_rules() {
        for (i, r) in RULES.iter().enumerate() {
            assert!(RULES[..i].iter().all(|q| q.name != r.name), "{}", r.name);
            assert!(
                r.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                r.name
            );
            if let RuleKind::Group(members) = r.kind {
                for m in members {
                    assert!(
                        matches!(find_rule(m).map(|r| r.kind), Some(RuleKind::Stmt(_))),
                        "{} names {m}",
                        r.name
                    );
                }
            }
        }
    }
}
