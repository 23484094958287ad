//! Round trips of the text format: random modules made through the builder's
//! `push_inst` print, parse back structurally equal and print again to the same
//! text; printed forms are exact; forward references and type inference work;
//! the parser never panics on garbage and stays within its nesting limit.

use irad_ir::builder::is_value_name;
use irad_ir::eq::structural_eq;
use irad_ir::func::{Const, FuncRef, InstKind, Module, Operand, Terminator, Value};
use irad_ir::prim::PRIMS;
use irad_ir::text::{Line, func_lines, parse_module, print_module};
use irad_ir::{FuncBuilder, Lanes, Prim, Scalar, Type};
use proptest::prelude::*;
use smallvec::SmallVec;

/// A small deterministic generator (xorshift64*), seeded by proptest.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

fn random_scalar(rng: &mut Rng) -> Scalar {
    *rng.pick(&[Scalar::F64, Scalar::I64, Scalar::Bool])
}

fn random_type(rng: &mut Rng, depth: usize) -> Type {
    let leaf = depth >= 3 || rng.chance(60);
    if leaf {
        return match rng.below(5) {
            0 => Type::F64,
            1 => Type::I64,
            2 => Type::Bool,
            3 => Type::Unit,
            _ => Type::Array(random_scalar(rng)),
        };
    }
    match rng.below(3) {
        0 => {
            let n = 1 + rng.below(3);
            Type::tuple((0..n).map(|_| random_type(rng, depth + 1)).collect())
        }
        1 => {
            let n = rng.below(3);
            let params = (0..n).map(|_| random_type(rng, depth + 1)).collect();
            Type::func(params, random_type(rng, depth + 1))
        }
        _ => {
            // dual<T> needs a T with a tangent; batch widths print as `, N`.
            let inner = random_type(rng, depth + 1);
            let inner = if inner.has_tangent() {
                inner
            } else {
                Type::F64
            };
            let lanes = if rng.chance(30) {
                Lanes::dense(2 + rng.below(3) as u32).unwrap_or(Lanes::ONE)
            } else {
                Lanes::ONE
            };
            Type::dual_n(inner, lanes)
        }
    }
}

const FUNC_NAMES: &[&str] = &["f", "g", "f.rev", "exp", "_h2", "main.fwd", "x"];
const VALUE_NAMES: &[Option<&str>] = &[
    None,
    None,
    Some("x"),
    Some("y"),
    Some("0"),
    Some("3"),
    Some("acc_2"),
    Some("a.b"),
];

fn random_f64(rng: &mut Rng) -> f64 {
    let special = [
        0.0,
        -0.0,
        1.0,
        -2.5e-3,
        0.1,
        1e16,
        1e300,
        -1e-300,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    if rng.chance(70) {
        *rng.pick(&special)
    } else {
        let x = f64::from_bits(rng.next());
        if x.is_nan() { 1.5 } else { x }
    }
}

fn random_const(rng: &mut Rng, m: &Module) -> Const {
    match rng.below(6) {
        0 | 1 => Const::F64(random_f64(rng)),
        2 => {
            let random = rng.next() as i64;
            Const::I64(*rng.pick(&[0, -7, 3, i64::MIN, i64::MAX, random]))
        }
        3 => Const::Bool(rng.chance(50)),
        4 => Const::Unit,
        _ => {
            let ids: Vec<_> = m.func_ids().collect();
            if rng.chance(50) && !ids.is_empty() {
                Const::Func(FuncRef::User(*rng.pick(&ids)))
            } else {
                // Only primitives the text can name: one signature, not shadowed.
                let usable: Vec<Prim> = PRIMS
                    .iter()
                    .map(|row| row.prim)
                    .filter(|p| p.fn_type().is_some() && m.by_name(p.name()).is_none())
                    .collect();
                Const::Func(FuncRef::Prim(*rng.pick(&usable)))
            }
        }
    }
}

fn random_operand(rng: &mut Rng, m: &Module, values: &[Value]) -> Operand {
    if !values.is_empty() && rng.chance(55) {
        Operand::Value(*rng.pick(values))
    } else {
        Operand::Const(random_const(rng, m))
    }
}

/// A random module: not well typed, but printable and parsable.
fn random_module(seed: u64) -> Module {
    let mut rng = Rng(seed | 1);
    let mut m = Module::new();
    let n_funcs = 1 + rng.below(4);
    let mut names: Vec<&str> = FUNC_NAMES.to_vec();
    for _ in 0..n_funcs {
        let name = names.remove(rng.below(names.len()));
        let n_params = rng.below(4);
        let params = (0..n_params)
            .map(|_| {
                let pname = rng.pick(VALUE_NAMES).map(str::to_string);
                (pname, random_type(&mut rng, 0))
            })
            .collect();
        let ret = random_type(&mut rng, 0);
        m.declare_func(name, params, ret).expect("fresh name");
    }
    let ids: Vec<_> = m.func_ids().collect();
    for id in ids {
        // Blocks with distinct labels in arbitrary order.
        let mut labels: Vec<u32> = (0..20).collect();
        let n_blocks = 1 + rng.below(5);
        let mut blocks = Vec::new();
        for _ in 0..n_blocks {
            let label = labels.remove(rng.below(labels.len()));
            blocks.push(m[id].add_block(label));
        }
        // Statements first (placeholder kinds), so operands may refer forward.
        let mut insts = Vec::new();
        let mut values: Vec<Value> = m[id].params.clone();
        for &block in &blocks {
            for _ in 0..rng.below(6) {
                let result_ty = rng.chance(80).then(|| random_type(&mut rng, 0));
                let kind = InstKind::Phi {
                    entries: SmallVec::new(),
                };
                let (inst, result) = m[id].push_inst(block, kind, result_ty, None);
                if let Some(v) = result {
                    m[id].values[v].name = rng.pick(VALUE_NAMES).map(|n| n.into());
                    values.push(v);
                }
                insts.push(inst);
            }
        }
        for inst in insts {
            let n_args = rng.below(4);
            let mut args = SmallVec::new();
            for _ in 0..n_args {
                args.push(random_operand(&mut rng, &m, &values));
            }
            let kind = match rng.below(4) {
                0 => InstKind::Prim {
                    prim: rng.pick(PRIMS).prim,
                    args,
                },
                1 => InstKind::Invoke {
                    func: *rng.pick(&m.func_ids().collect::<Vec<_>>()),
                    args,
                },
                2 if !values.is_empty() => InstKind::CallValue {
                    callee: *rng.pick(&values),
                    args,
                },
                _ => {
                    let mut entries = SmallVec::new();
                    for _ in 0..rng.below(4) {
                        let pred = *rng.pick(&blocks);
                        entries.push((pred, random_operand(&mut rng, &m, &values)));
                    }
                    InstKind::Phi { entries }
                }
            };
            m[id].insts[inst].kind = kind;
        }
        for &block in &blocks {
            let term = match rng.below(4) {
                0 => Terminator::Goto(*rng.pick(&blocks)),
                1 => Terminator::GotoIfNot {
                    cond: random_operand(&mut rng, &m, &values),
                    target: *rng.pick(&blocks),
                },
                2 => Terminator::Switch {
                    index: random_operand(&mut rng, &m, &values),
                    targets: (0..rng.below(4)).map(|_| *rng.pick(&blocks)).collect(),
                },
                _ => Terminator::Return(random_operand(&mut rng, &m, &values)),
            };
            m[id].blocks[block].term = Some(term);
        }
    }
    m
}

fn check_round_trip(m: &Module) -> Result<(), String> {
    let text = print_module(m);
    let back = parse_module(&text).map_err(|e| format!("{:?}: {e}\n{text}", e.loc.pos))?;
    structural_eq(&back, m).map_err(|e| format!("{e}\n{text}"))?;
    let again = print_module(&back);
    if again != text {
        return Err(format!("second print differs:\n{text}\n---\n{again}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_modules_round_trip(seed in any::<u64>()) {
        let m = random_module(seed);
        if let Err(e) = check_round_trip(&m) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn garbage_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_module(&text);
    }

    #[test]
    fn token_soup_never_panics(picks in proptest::collection::vec(0usize..TOKENS.len(), 0..120)) {
        let text: Vec<&str> = picks.iter().map(|&i| TOKENS[i]).collect();
        let _ = parse_module(&text.join(" "));
        let _ = parse_module(&text.concat());
    }

    #[test]
    fn mutated_corpus_never_panics(cut in 0usize..2000, insert in 0usize..TOKENS.len()) {
        let src = include_str!("data/break_continue.ir");
        let at = cut.min(src.len());
        if src.is_char_boundary(at) {
            let text = format!("{}{}{}", &src[..at], TOKENS[insert], &src[at..]);
            let _ = parse_module(&text);
            let _ = parse_module(&src[..at]);
        }
    }
}

const TOKENS: &[&str] = &[
    "func",
    "@f",
    "@g",
    "@sin",
    "@lt",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "%x",
    "%1",
    ":",
    "::",
    ",",
    "->",
    "=>",
    "=",
    "#1",
    "#2",
    "#1:",
    "#2:",
    "f64",
    "i64",
    "bool",
    "fn",
    "dual",
    "<",
    ">",
    "call",
    "invoke",
    "phi",
    "goto",
    "gotoifnot",
    "switch",
    "return",
    "add",
    "alloc",
    "getfield",
    "1.0",
    "-",
    "7",
    "-3",
    "1e5",
    "inf",
    "nan",
    "true",
    "()",
    "# c\n",
    "\n",
    "99999999999999999999",
    "#99999999999",
    "%",
    "@",
    "1.",
    "é",
];

#[test]
fn seeds_that_matter_round_trip() {
    for seed in 0..300u64 {
        let m = random_module(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        assert_eq!(check_round_trip(&m), Ok(()), "seed {seed}");
    }
}

#[test]
fn printed_form_is_exact() {
    let mut m = Module::new();
    let g = m
        .declare_func("g", vec![(Some("x".into()), Type::F64)], Type::F64)
        .expect("declare");
    let f = m
        .declare_func(
            "abs_sin",
            vec![
                (Some("x".into()), Type::F64),
                (None, Type::Array(Scalar::F64)),
            ],
            Type::tuple(vec![Type::F64]),
        )
        .expect("declare");
    {
        let mut b = FuncBuilder::new(&mut m, g).expect("builder");
        let entry = b.create_block_labeled(1).expect("block");
        b.switch_to_block(entry).expect("switch");
        let x = b.param(0).expect("param");
        b.ret(Operand::Value(x)).expect("ret");
    }
    let mut b = FuncBuilder::new(&mut m, f).expect("builder");
    let x = b.param(0).expect("param");
    let arr = b.param(1).expect("param");
    let b1 = b.create_block_labeled(1).expect("block");
    let b3 = b.create_block_labeled(3).expect("block");
    let b2 = b.create_block_labeled(2).expect("block");
    b.switch_to_block(b1).expect("switch");
    let s = b.prim(Prim::Sin, &[x.into()]).expect("sin").expect("value");
    b.set_name(s, "x").expect("name"); // a duplicate of the parameter's name
    let c = b
        .prim(Prim::Lt, &[s.into(), 0.0.into()])
        .expect("lt")
        .expect("value");
    b.prim(Prim::Arrayset, &[arr.into(), 0i64.into(), (-0.0).into()])
        .expect("arrayset");
    let fv = Operand::Const(Const::Func(FuncRef::User(g)));
    let dyn_callee = b
        .prim(Prim::Select, &[true.into(), fv, fv])
        .expect("select")
        .expect("v");
    b.set_name(dyn_callee, "0").expect("name");
    b.gotoifnot(c.into(), b2).expect("gotoifnot");
    b.switch_to_block(b3).expect("switch");
    let n = b.prim(Prim::Neg, &[s.into()]).expect("neg").expect("value");
    let d = b
        .call_value(dyn_callee, &[n.into()])
        .expect("call")
        .expect("value");
    let e = b.invoke(g, &[1e16.into()]).expect("invoke").expect("value");
    b.set_name(e, "e").expect("name");
    b.goto(b2).expect("goto");
    b.switch_to_block(b2).expect("switch");
    let p = b
        .phi(Type::F64, &[(b1, s.into()), (b3, d.into())])
        .expect("phi");
    let t = b
        .prim(Prim::Tuple, &[p.into()])
        .expect("tuple")
        .expect("value");
    b.ret(t.into()).expect("ret");

    let expected = "\
func @g(%x: f64) -> f64 {
#1:
  return %x
}

func @abs_sin(%1: f64, %2: [f64]) -> (f64,) {
#1:
  %3 = call sin(%1) :: f64
  %4 = call lt(%3, 0.0) :: bool
  call arrayset(%2, 0, -0.0)
  %0 = call select(true, @g, @g) :: fn(f64) -> f64
  gotoifnot %4, #2
#3:
  %5 = call neg(%3) :: f64
  %6 = call %0(%5) :: f64
  %e = invoke @g(1e16) :: f64
  goto #2
#2:
  %7 = phi [#1 => %3, #3 => %6] :: f64
  %8 = call tuple(%7) :: (f64,)
  return %8
}
";
    assert_eq!(print_module(&m), expected);
    let back = parse_module(expected).expect("parses");
    assert_eq!(structural_eq(&back, &m), Ok(()));
    assert_eq!(print_module(&back), expected);

    let lines = func_lines(&m, f);
    assert_eq!(lines.first().map(|l| l.0), Some(Line::Header));
    assert_eq!(lines.get(1).map(|l| l.0), Some(Line::Label(b1)));
    assert_eq!(lines.last().map(|l| l.0), Some(Line::End));
    assert!(
        lines
            .iter()
            .any(|l| l.0 == Line::Term(b3) && l.1 == "  goto #2")
    );
    assert!(is_value_name("0"));
}

#[test]
fn forward_references_and_inference() {
    // Blocks out of dominance order; a use before its definition in layout;
    // types inferred through forward references, calls and phis.
    let src = "\
func @f(%x: f64, %n: i64) -> f64 {
#0:
  goto #2
#1:                      # laid out before the block that dominates it
  %r = call add(%y, %w)
  return %r
#2:
  %y = call mul(%x, %x)
  %h = invoke @later(%y)
  %g = call select(true, @sin, @later)
  %w = call %g(%h)
  %i = phi [#0 => %k]
  %k = call iadd(%n, 1)
  goto #1
}

func @later(%z: f64) -> f64 {
#1:
  return %z
}
";
    let m = parse_module(src).expect("parses");
    let text = print_module(&m);
    for line in [
        "  %r = call add(%y, %w) :: f64",
        "  %h = invoke @later(%y) :: f64",
        "  %g = call select(true, @sin, @later) :: fn(f64) -> f64",
        "  %w = call %g(%h) :: f64",
        "  %i = phi [#0 => %k] :: i64",
    ] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
    assert_eq!(check_round_trip(&m), Ok(()));
    let f = m.by_name("f").expect("f");
    let func = &m[f];
    assert_eq!(func.pos.map(|p| p.to_string()), Some("1:1".into()));
    let b1 = func.layout[1];
    assert_eq!(
        func.blocks[b1].pos.map(|p| p.to_string()),
        Some("4:1".into())
    );
    assert_eq!(
        func.blocks[b1].term_pos.map(|p| p.to_string()),
        Some("6:3".into())
    );
    let first = func.blocks[b1].insts[0];
    assert_eq!(
        func.insts[first].pos.map(|p| p.to_string()),
        Some("5:3".into())
    );
}

#[test]
fn function_constant_shadows_primitive() {
    let src = "\
func @f(%x: f64) -> fn(i64) -> i64 {
#1:
  %s = call sin(%x)
  return @sin
}

func @sin(%k: i64) -> i64 {
#1:
  return %k
}
";
    let m = parse_module(src).expect("parses");
    let text = print_module(&m);
    assert!(text.contains("  %s = call sin(%x) :: f64\n"), "{text}");
    assert!(text.contains("  return @sin\n"), "{text}");
    let f = m.by_name("f").expect("f");
    let b = m[f].layout[0];
    let sin = m.by_name("sin").expect("sin");
    assert_eq!(
        m[f].blocks[b].term,
        Some(Terminator::Return(Operand::Const(Const::Func(
            FuncRef::User(sin)
        ))))
    );
}

#[test]
fn literals_and_comments() {
    let src = "# leading comment\nfunc @f() -> f64 { # after the brace\n#7: # after a label\n  %a = call add(-2.5e-3, 1e-5) # trailing\n  %b = call add(-inf, nan)\n  %c = call powi(%a, -7)\n  %u = call tuple(()) :: (\n    (),\n  )\n  return %c\n}\n";
    let m = parse_module(src).expect("parses");
    let text = print_module(&m);
    assert!(
        text.contains("  %a = call add(-0.0025, 1e-5) :: f64\n"),
        "{text}"
    );
    assert!(
        text.contains("  %b = call add(-inf, nan) :: f64\n"),
        "{text}"
    );
    assert!(text.contains("  %c = call powi(%a, -7) :: f64\n"), "{text}");
    assert!(text.contains("  %u = call tuple(()) :: ((),)\n"), "{text}");
}

#[test]
fn large_input_parses() {
    // 100 000 statements in one function: a quadratic parser would not finish.
    let mut src = String::from("func @big(%x: f64) -> f64 {\n#1:\n  %v0 = call add(%x, 1.0)\n");
    for i in 1..100_000 {
        src.push_str(&format!("  %v{i} = call mul(%v{}, %x)\n", i - 1));
    }
    src.push_str("  return %v99999\n}\n");
    let m = parse_module(&src).expect("parses");
    assert_eq!(m.len(), 1);
}

#[test]
fn reverse_mode_forms_print_exactly() {
    let mut m = Module::new();
    let sig = Type::func(vec![Type::Array(Scalar::F64), Type::F64], Type::F64);
    let f = m
        .declare_func(
            "f",
            vec![(Some("i".into()), Type::I64), (Some("g".into()), sig)],
            Type::F64,
        )
        .expect("declare");
    let mut b = FuncBuilder::new(&mut m, f).expect("builder");
    let (i, g) = (b.param(0).expect("i"), b.param(1).expect("g"));
    let [b1, b2, b3] = [1, 2, 3].map(|l| b.create_block_labeled(l).expect("block"));
    b.switch_to_block(b1).expect("block");
    b.prim(Prim::Push, &[i.into()]).expect("push");
    let fwd = b
        .prim(Prim::Revfwd, &[g.into()])
        .expect("revfwd")
        .expect("value");
    let back = b
        .prim(Prim::Revback, &[g.into()])
        .expect("revback")
        .expect("value");
    b.prim(Prim::Push, &[fwd.into()]).expect("push");
    b.prim(Prim::Push, &[back.into()]).expect("push");
    b.switch(i.into(), &[b3, b2]).expect("switch");
    b.switch_to_block(b2).expect("block");
    let u = b.pop(Type::Unit).expect("pop");
    b.prim(Prim::Push, &[u.into()]).expect("push");
    let pair = Type::tuple(vec![Type::F64, Type::I64]);
    b.pop(pair).expect("pop");
    b.goto(b3).expect("goto");
    b.switch_to_block(b3).expect("block");
    let x = b.pop(Type::F64).expect("pop");
    b.ret(x.into()).expect("ret");
    let expected = "\
func @f(%i: i64, %g: fn([f64], f64) -> f64) -> f64 {
#1:
  call push(%i)
  %0 = call revfwd(%g) :: fn([f64], f64, [f64]) -> f64
  %1 = call revback(%g) :: fn(f64) -> f64
  call push(%0)
  call push(%1)
  switch %i, [#3, #2]
#2:
  %2 = call pop() :: ()
  call push(%2)
  %3 = call pop() :: (f64, i64)
  goto #3
#3:
  %4 = call pop() :: f64
  return %4
}
";
    assert_eq!(print_module(&m), expected);
    let back = parse_module(expected).expect("parses");
    assert_eq!(structural_eq(&back, &m), Ok(()));
    assert_eq!(print_module(&back), expected);
    irad_ir::verify::verify_module(&back).expect("verifies");
    // Equality sees the order of switch targets and the type of a pop.
    for changed in [
        expected.replace("[#3, #2]", "[#2, #3]"),
        expected.replace("[#3, #2]", "[#3]"),
        expected.replace("pop() :: (f64, i64)", "pop() :: (f64, f64)"),
    ] {
        let other = parse_module(&changed).expect("parses");
        assert!(structural_eq(&other, &m).is_err(), "{changed}");
    }
}
