//! The program generator: from fuzzer bytes (an `arbitrary::Unstructured`),
//! a surface-language program (docs/language.md) that loads, verifies and
//! terminates, with arguments for its entry function `main`.
//!
//! Programs have helper functions (binary, unary, one returning a tuple, a
//! higher-order `apply`), a recursive function with a depth argument that
//! every call bounds, and, each when the bytes ask for it, helpers for what
//! users write beyond that: two array parameters that callers may alias
//! (`mix(a, a, x)`), recursion that reads and writes an array (`reca`), a
//! function value carried in a tuple (`applyt`, `pickf`), a wide
//! signature returning a large tuple (`wide`), and a function returning a
//! new array made in a loop over its argument (`remake`), one returning
//! its argument written in place (`touch`) and one returning either
//! (`either`), by which loops carrying an array may replace it, and one
//! returning the next state of a loop carrying a tuple (`remake_t`), with
//! one taking such a state whole (`norm_t`). `main(x0, .., t, a, n)` takes
//! f64 scalars (sometimes a dozen or more), an optional tuple of f64s, an
//! optional `[f64]` array and an optional small i64. Its body mixes lets,
//! mutable locals, `if`/`else` (and long chains and runs of them), `for`
//! loops over constants, `len(a)` and `n`, `while` loops with counters and
//! with data-dependent exits (`&&` in the condition, `break`, `continue`),
//! early `return`s from inside loops, reads and in-place writes of the
//! argument array, of local arrays (`alloc`, `zeros`) and of aliases of
//! them (`let b = a;`), tuples, static calls, dynamic calls through function
//! values chosen at run time or kept in tuples, every f64 primitive, and
//! every bulk array primitive (`sum dot axpy scale fill copyto matvec
//! matmul`) on arrays whose lengths fit (with matrices made to fit).
//!
//! Each program lists the features it was built with
//! ([`Program::features`], named by [`FEATURES`]), for the runner's coverage
//! table.
//!
//! Assumes nothing of the bytes: running out of them ends each choice at its
//! simplest option. Guarantees: the text loads without error (the generator
//! only writes well-typed, well-scoped code); every loop is bounded by a
//! small count, and recursion by a constant depth, so programs terminate;
//! primitives get operands inside their domains (`log(1.5 + tanh(e))`,
//! `asin(0.9 * tanh(e))`, divisors `1.5 + tanh(e)`, ...) and indices inside
//! their arrays, so most programs run without a run-time error (some still
//! stop with one, e.g. `i64()` of a huge value, or a bulk primitive given
//! one array as input and output through an alias, and that is part of
//! what is tested). With `smooth` set, the non-smooth primitives (`abs`,
//! `floor`, `min`, comparisons feeding values, ...) are left out of the f64
//! data flow, and bulk primitives get distinct arrays, so finite differences
//! apply away from branch points.

use arbitrary::{Result, Unstructured};
use std::fmt::Write;

/// What the generator may produce.
#[derive(Clone, Debug)]
pub struct Config {
    /// At most this many statements in `main`'s top-level body.
    pub max_stmts: usize,
    /// At most this depth of nested expressions.
    pub max_expr_depth: u32,
    /// Leave out non-smooth primitives.
    pub smooth: bool,
    /// At most this depth of nested loops (2 by default; the `checkpoint`
    /// target asks for 3, for loops checkpointed inside one another).
    pub max_loop_depth: u32,
    /// Also write loops that carry an array from one iteration to the next
    /// (a copy per iteration handed on, on every iteration or under a
    /// condition, a `break` before or after the
    /// hand-over, the array read after the loop and maybe carried on by a
    /// later loop): the `checkpoint` and `derivatives` targets ask for them
    /// (reverse mode's checkpoints and forward mode's split phis carry such
    /// arrays); off by default, so the other targets' programs are those of
    /// earlier runs.
    pub carried_arrays: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_stmts: 12,
            max_expr_depth: 4,
            smooth: false,
            max_loop_depth: 2,
            carried_arrays: false,
        }
    }
}

/// A generated program and a call of its entry function.
#[derive(Clone, Debug)]
pub struct Program {
    /// Surface-language source text.
    pub source: String,
    /// The entry function's name (`main`).
    pub func: String,
    /// The arguments, in `--args` syntax.
    pub args: String,
    /// The features the generator put in it, one entry per occurrence
    /// (names from [`FEATURES`]).
    pub features: Vec<&'static str>,
}

impl Program {
    /// A program written out as text (a regression test's file): its entry
    /// is `main`, and its arguments are on its last line that starts with
    /// `// args: `. `None` without such a line.
    pub fn from_text(text: &str) -> Option<Program> {
        let args = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("// args: "))?
            .to_string();
        Some(Program {
            source: text.to_string(),
            func: "main".into(),
            args,
            features: Vec::new(),
        })
    }
}

/// The features the generator records, in the order the coverage table
/// lists them.
pub const FEATURES: &[&str] = &[
    "let",
    "let mut",
    "assign",
    "if",
    "if-else",
    "if-expr",
    "if-chain (else if)",
    "if-run (many ifs)",
    "for",
    "for-nested",
    "while-counted",
    "while-data-exit",
    "break",
    "continue",
    "return-in-loop",
    "carried-while",
    "carried-while-and",
    "carried-while-true",
    "carried-break-before-hand-over",
    "carried-break-after-hand-over",
    "carried-break-before-kept-best",
    "carried-hand-over-sometimes",
    "carried-tuple",
    "carried-tuple-by-call",
    "carried-tuple-whole",
    "carried-tuple-kept-by-call",
    "carried-tuple-field-reread",
    "carried-handed",
    "carried-handed-same",
    "carried-kept-best",
    "carried-kept-best-before",
    "carried-kept-best-two",
    "carried-kept-best-swap",
    "carried-kept-best-new",
    "carried-swap-inner-loop",
    "carried-swap-sometimes",
    "carried-swap-inner-while",
    "carried-remade-by-call",
    "carried-kept-through-call",
    "carried-either-way-by-call",
    "array-local",
    "array-write",
    "array-alias (let b = a)",
    "matrix-setup",
    "bulk-sum",
    "bulk-dot",
    "bulk-axpy",
    "bulk-scale",
    "bulk-fill",
    "bulk-copyto",
    "bulk-matvec",
    "bulk-matmul",
    "bulk-aliased (error path)",
    "call-static",
    "call-apply",
    "call-rec",
    "call-reca (recursion with an array)",
    "call-mix (two arrays)",
    "call-mix-aliased",
    "fn-value-chosen",
    "fn-value-in-tuple",
    "call-applyt (tuple with a fn)",
    "call-pickf (fn returned in a tuple)",
    "call-wide (large tuple)",
    "param-array",
    "param-i64",
    "param-tuple",
    "params-many (> 8 f64)",
];

/// A generated program (see the module comment).
pub fn program(u: &mut Unstructured<'_>, cfg: &Config) -> Result<Program> {
    let mut g = Gen {
        u,
        cfg: cfg.clone(),
        out: String::new(),
        scopes: Vec::new(),
        fresh: 0,
        binary: 0,
        unary: 0,
        extra: Extra::default(),
        loop_depth: 0,
        next_array: 0,
        features: Vec::new(),
    };
    g.helpers()?;
    let args = g.main()?;
    Ok(Program {
        source: g.out,
        func: "main".into(),
        args,
        features: g.features,
    })
}

/// The unary f64 primitives, each with an operand wrapper that keeps its
/// argument inside its domain (`{}` is the operand), and whether it is
/// smooth there.
const UNARY: &[(&str, &str, bool)] = &[
    ("sin", "{}", true),
    ("cos", "{}", true),
    ("tan", "tanh({})", true),
    ("atan", "{}", true),
    ("tanh", "{}", true),
    ("sinh", "2.0 * tanh({})", true),
    ("cosh", "2.0 * tanh({})", true),
    ("exp", "2.0 * tanh({})", true),
    ("expm1", "2.0 * tanh({})", true),
    ("log", "1.5 + tanh({})", true),
    ("log1p", "0.5 * tanh({})", true),
    ("sqrt", "1.5 + tanh({})", true),
    ("asin", "0.9 * tanh({})", true),
    ("acos", "0.9 * tanh({})", true),
    ("erf", "{}", true),
    ("neg", "{}", true),
    ("abs", "{}", false),
    ("floor", "{}", false),
    ("ceil", "{}", false),
    ("round", "{}", false),
];

/// Binary f64 primitives called by name, with operand wrappers.
const BINARY: &[(&str, &str, &str, bool)] = &[
    ("atan2", "{}", "1.5 + tanh({})", true),
    ("pow", "1.5 + tanh({})", "2.0 * tanh({})", true),
    ("min", "{}", "{}", false),
    ("max", "{}", "{}", false),
    ("copysign", "{}", "{}", false),
    // The strong product of derivatives (docs/rules.md): `mul` but 0 for a
    // zero operand; generated so its lowering meets the interpreter.
    ("zmul", "{}", "{}", true),
];

/// The helpers a program has beyond the fixed ones.
#[derive(Clone, Copy, Debug, Default)]
struct Extra {
    /// `mix(p: [f64], q: [f64], s: f64) -> f64`, which callers may alias.
    mix: bool,
    /// `reca(x: f64, a: [f64], d: i64) -> f64`: recursion writing an array.
    reca: bool,
    /// `applyt` and `pickf`: function values in tuples.
    fn_tuples: bool,
    /// `wide(p0, .., pK-1) -> (f64, ..)` with K f64s (0: none).
    wide: usize,
    /// `remake(a: [f64], s: f64) -> [f64]`: a new array from a loop over
    /// `a`, `touch(a: [f64], s: f64) -> [f64]`, `a` written in place
    /// and returned, and `either(a: [f64], s: f64) -> [f64]`, `a` or a
    /// new array by the sign of `s`, which carried loops may replace their
    /// array by.
    remake: bool,
}

/// A variable in scope.
#[derive(Clone, Debug)]
enum Var {
    F64 {
        name: String,
        mutable: bool,
    },
    I64 {
        name: String,
        bound: usize,
    },
    /// `id` names the array itself: aliases (`let b = a;`) share it.
    Array {
        name: String,
        len: usize,
        id: usize,
    },
    /// A tuple of `len` f64s.
    Tuple {
        name: String,
        len: usize,
    },
}

struct Gen<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    cfg: Config,
    out: String,
    scopes: Vec<Vec<Var>>,
    fresh: usize,
    /// Helpers `b0..`: `(f64, f64) -> f64`.
    binary: usize,
    /// Helpers `u0..`: `f64 -> f64`.
    unary: usize,
    extra: Extra,
    loop_depth: u32,
    /// The next array identity.
    next_array: usize,
    features: Vec<&'static str>,
}

/// An array in scope: name, length, identity.
type ArrayVar = (String, usize, usize);

impl Gen<'_, '_> {
    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn note(&mut self, feature: &'static str) {
        self.features.push(feature);
    }

    fn push(&mut self, var: Var) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(var);
        }
    }

    fn vars(&self) -> impl Iterator<Item = &Var> {
        self.scopes.iter().flatten()
    }

    fn f64_vars(&self) -> Vec<String> {
        self.vars()
            .filter_map(|v| match v {
                Var::F64 { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    fn mut_vars(&self) -> Vec<String> {
        self.vars()
            .filter_map(|v| match v {
                Var::F64 {
                    name,
                    mutable: true,
                } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    fn arrays(&self) -> Vec<ArrayVar> {
        self.vars()
            .filter_map(|v| match v {
                Var::Array { name, len, id } => Some((name.clone(), *len, *id)),
                _ => None,
            })
            .collect()
    }

    fn tuples(&self) -> Vec<(String, usize)> {
        self.vars()
            .filter_map(|v| match v {
                Var::Tuple { name, len } => Some((name.clone(), *len)),
                _ => None,
            })
            .collect()
    }

    fn ints(&self) -> Vec<(String, usize)> {
        self.vars()
            .filter_map(|v| match v {
                Var::I64 { name, bound } => Some((name.clone(), *bound)),
                _ => None,
            })
            .collect()
    }

    fn new_array(&mut self, name: String, len: usize) {
        let id = self.next_array;
        self.next_array += 1;
        self.push(Var::Array { name, len, id });
    }

    fn line(&mut self, indent: usize, text: &str) {
        for _ in 0..indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// A small f64 literal.
    fn literal(&mut self) -> Result<String> {
        let k: i16 = self.u.int_in_range(-40..=40)?;
        Ok(format!("{:.2}", f64::from(k) / 10.0))
    }

    /// Whether to take a choice of probability 1 in `n`.
    fn one_in(&mut self, n: u8) -> Result<bool> {
        Ok(self.u.int_in_range(1..=n)? == 1)
    }
    /// The helper functions, each using only earlier ones.
    fn helpers(&mut self) -> Result<()> {
        self.binary = self.u.int_in_range(0..=2)?;
        self.unary = self.u.int_in_range(1..=2)?;
        for k in 0..self.binary {
            self.scopes.push(vec![
                Var::F64 {
                    name: "p".into(),
                    mutable: false,
                },
                Var::F64 {
                    name: "q".into(),
                    mutable: false,
                },
            ]);
            let saved = self.binary;
            self.binary = k;
            let saved_u = self.unary;
            self.unary = 0;
            let e = self.expr(2)?;
            self.binary = saved;
            self.unary = saved_u;
            self.scopes.pop();
            let _ = writeln!(self.out, "fn b{k}(p: f64, q: f64) -> f64 {{ {e} }}\n");
        }
        for k in 0..self.unary {
            self.scopes.push(vec![Var::F64 {
                name: "p".into(),
                mutable: false,
            }]);
            let saved = self.unary;
            self.unary = k;
            let e = self.expr(2)?;
            self.unary = saved;
            self.scopes.pop();
            let _ = writeln!(self.out, "fn u{k}(p: f64) -> f64 {{ {e} }}\n");
        }
        self.out
            .push_str("fn apply(g: fn(f64) -> f64, x: f64) -> f64 { g(x) }\n\n");
        self.out
            .push_str("fn pair(x: f64) -> (f64, f64) { (sin(x), x * cos(x)) }\n\n");
        // Bounded recursion: every call passes a constant depth of at most 4.
        self.out.push_str(
            "fn rec(x: f64, d: i64) -> f64 {\n    if d <= 0 { x } else { 0.5 * sin(rec(x * 0.9, d - 1)) + x }\n}\n\n",
        );
        self.extra_helpers()
    }

    /// The helpers of [`Extra`] the bytes ask for.
    fn extra_helpers(&mut self) -> Result<()> {
        self.extra.mix = self.one_in(3)?;
        self.extra.reca = self.one_in(3)?;
        self.extra.fn_tuples = self.one_in(3)?;
        self.extra.wide = if self.one_in(4)? {
            self.u.int_in_range(4..=24)?
        } else {
            0
        };
        if self.extra.mix {
            // Writes through one array parameter that reads through the
            // other see when the caller passes one array twice. Arrays are
            // never empty.
            self.out.push_str(
                "fn mix(p: [f64], q: [f64], s: f64) -> f64 {\n    let i = len(p) - 1;\n    p[i] = p[i] * 0.5 + tanh(s);\n    q[0] = q[0] * 0.5 - p[i];\n    p[0] * q[i % len(q)] + s\n}\n\n",
            );
        }
        if self.extra.reca {
            self.out.push_str(
                "fn reca(x: f64, a: [f64], d: i64) -> f64 {\n    if d <= 0 {\n        x + a[0]\n    } else {\n        let i = d % len(a);\n        a[i] = a[i] * 0.5 + sin(x);\n        reca(x * 0.9, a, d - 1) * 0.5 + a[i] * x\n    }\n}\n\n",
            );
        }
        if self.extra.fn_tuples {
            self.out
                .push_str("fn applyt(t: (fn(f64) -> f64, f64)) -> f64 { let g = t.0; g(t.1) }\n\n");
            self.out.push_str(
                "fn pickf(c: bool) -> (fn(f64) -> f64, f64) { if c { (sin, 0.5) } else { (u0, 1.5) } }\n\n",
            );
        }
        self.extra.remake = self.one_in(3)?;
        if self.extra.remake {
            self.out.push_str(
                "fn remake(a: [f64], s: f64) -> [f64] {\n    let b = copy(a);\n    for i in 0..len(a) {\n        b[i] = a[i] * 0.75 + 0.25 * tanh(a[(i + 1) % len(a)] + s);\n    }\n    b\n}\n\n",
            );
            self.out.push_str(
                "fn touch(a: [f64], s: f64) -> [f64] {\n    let i = len(a) - 1;\n    a[i] = a[i] * 0.5 + tanh(a[0] * s);\n    a\n}\n\n",
            );
            // The next state returned as a tuple, its array fresh through
            // `remake`; and a tuple taken whole (docs/reverse.md, "Arrays in
            // the fields of a call's tuple result").
            self.out.push_str(
                "fn remake_t(a: [f64], s: f64) -> ([f64], f64) {\n    let b = remake(a, s);\n    (b, s * 0.5 + tanh(b[0]))\n}\n\n",
            );
            self.out
                .push_str("fn norm_t(t: ([f64], f64)) -> f64 {\n    tanh(t.0[0]) + t.1\n}\n\n");
            // The next state written in place and handed back in a tuple
            // (a kept field, docs/reverse.md, "Arrays kept in the fields of
            // a call's tuple result").
            self.out.push_str(
                "fn touch_t(a: [f64], s: f64) -> ([f64], f64) {\n    let b = touch(a, s);\n    (b, s * 0.5 + tanh(b[0]))\n}\n\n",
            );
            self.out.push_str(
                "fn either(a: [f64], s: f64) -> [f64] {\n    if s > 0.0 {\n        a[0] = a[0] * 0.75 + 0.25 * tanh(s);\n        a\n    } else {\n        let b = copy(a);\n        b[0] = b[0] * 0.5 + tanh(s);\n        b\n    }\n}\n\n",
            );
        }
        let k = self.extra.wide;
        if k > 0 {
            let params: Vec<String> = (0..k).map(|i| format!("p{i}: f64")).collect();
            let types = vec!["f64"; k].join(", ");
            let elems: Vec<String> = (0..k)
                .map(|i| format!("p{i} * 0.5 + tanh(p{})", (i + 1) % k))
                .collect();
            let _ = writeln!(
                self.out,
                "fn wide({}) -> ({types}) {{\n    ({})\n}}\n",
                params.join(", "),
                elems.join(", ")
            );
        }
        Ok(())
    }

    /// `main`'s parameters, and their arguments in `--args` syntax.
    fn main_params(&mut self) -> Result<(Vec<String>, Vec<String>, Vec<Var>)> {
        let many = self.one_in(12)?;
        let scalars = if many {
            self.note("params-many (> 8 f64)");
            self.u.int_in_range(9..=20)?
        } else {
            self.u.int_in_range(1..=3)?
        };
        let has_tuple = self.one_in(6)?;
        let has_array = self.u.arbitrary::<bool>()?;
        let has_n = self.u.arbitrary::<bool>()?;
        let mut params = Vec::new();
        let mut args = Vec::new();
        let mut scope = Vec::new();
        let value = |g: &mut Self| -> Result<String> {
            let v: i16 = g.u.int_in_range(-2000..=2000)?;
            Ok(format!("{:.3}", f64::from(v) / 1000.0))
        };
        for k in 0..scalars {
            params.push(format!("x{k}: f64"));
            args.push(value(self)?);
            scope.push(Var::F64 {
                name: format!("x{k}"),
                mutable: false,
            });
        }
        if has_tuple {
            self.note("param-tuple");
            let len = self.u.int_in_range(2..=12)?;
            params.push(format!("t: ({})", vec!["f64"; len].join(", ")));
            let mut elems = Vec::new();
            for _ in 0..len {
                elems.push(value(self)?);
            }
            args.push(format!("({})", elems.join(", ")));
            scope.push(Var::Tuple {
                name: "t".into(),
                len,
            });
        }
        if has_array {
            self.note("param-array");
            let len = self.u.int_in_range(1..=5)?;
            params.push("a: [f64]".into());
            let mut elems = Vec::new();
            for _ in 0..len {
                elems.push(value(self)?);
            }
            args.push(format!("[{}]", elems.join(", ")));
            scope.push(Var::Array {
                name: "a".into(),
                len,
                id: self.next_array,
            });
            self.next_array += 1;
        }
        if has_n {
            self.note("param-i64");
            params.push("n: i64".into());
            let n: u8 = self.u.int_in_range(0..=4)?;
            args.push(n.to_string());
            scope.push(Var::I64 {
                name: "n".into(),
                bound: 5,
            });
        }
        Ok((params, args, scope))
    }

    /// `main`'s signature, body and arguments.
    fn main(&mut self) -> Result<String> {
        let (params, args, scope) = self.main_params()?;
        let _ = writeln!(self.out, "fn main({}) -> f64 {{", params.join(", "));
        self.scopes.push(scope);
        let acc = "acc".to_string();
        let init = self.expr(1)?;
        self.line(1, &format!("let mut {acc} = {init};"));
        self.push(Var::F64 {
            name: acc.clone(),
            mutable: true,
        });
        let n = self.u.int_in_range(1..=self.cfg.max_stmts.max(1))?;
        for _ in 0..n {
            if self.u.is_empty() {
                break;
            }
            self.stmt(1)?;
        }
        let tail = self.expr(1)?;
        self.line(1, &format!("{acc} + {tail}"));
        self.line(0, "}");
        self.scopes.pop();
        Ok(args.join(", "))
    }

    /// A loop whose double buffer (copies of array `a`, of length `len`) is
    /// swapped inside it: in a loop inside it, on some iterations only, or
    /// in an inner `while` left by `break`. Both buffers hold, on every
    /// visit, one of the arrays the loop entered with: kept as they are
    /// (docs/reverse.md, "Arrays carried through the header"; since
    /// session 40). Both are read after it.
    fn swap_inside(&mut self, indent: usize, a: &str, len: usize) -> Result<()> {
        let (x, y, i) = (self.name("sa"), self.name("sb"), self.name("i"));
        self.line(indent, &format!("let mut {x} = copy({a});"));
        let other = match self.u.arbitrary::<bool>()? {
            true => format!("zeros({len})"),
            false => format!("copy({a})"),
        };
        self.line(indent, &format!("let mut {y} = {other};"));
        let n: u8 = self.u.int_in_range(0..=5)?;
        self.line(indent, &format!("for {i} in 0..{n} {{"));
        self.loop_depth += 1;
        let t = self.name("t");
        let swap = format!("let {t} = {x}; {x} = {y}; {y} = {t};");
        let (j, k) = (self.index(len)?, self.index(len)?);
        let e = self.expr(1)?;
        let sweep = format!("{y}[{j}] = {x}[{k}] * 0.5 + 0.25 * tanh({e});");
        let m: u8 = self.u.int_in_range(0..=3)?;
        match self.u.int_in_range(0..=2u8)? {
            0 => {
                self.note("carried-swap-inner-loop");
                let q = self.name("q");
                self.line(indent + 1, &format!("for {q} in 0..{m} {{"));
                self.line(indent + 2, &sweep);
                self.line(indent + 2, &swap);
                self.line(indent + 1, "}");
            }
            1 => {
                self.note("carried-swap-sometimes");
                self.line(indent + 1, &sweep);
                let c = self.cond(1)?;
                self.line(indent + 1, &format!("if {c} {{ {swap} }}"));
            }
            _ => {
                self.note("carried-swap-inner-while");
                let q = self.name("q");
                let c = self.cond(1)?;
                self.line(indent + 1, &format!("let mut {q} = 0;"));
                self.line(indent + 1, &format!("while {q} < {m} {{"));
                self.line(indent + 2, &sweep);
                self.line(indent + 2, &swap);
                self.line(indent + 2, &format!("if {c} {{ break; }}"));
                self.line(indent + 2, &format!("{q} = {q} + 1;"));
                self.line(indent + 1, "}");
            }
        }
        let r = self.index(len)?;
        self.line(indent + 1, &format!("acc = acc + 0.25 * tanh({x}[{r}]);"));
        self.loop_depth -= 1;
        self.line(indent, "}");
        let (u, v) = (self.index(len)?, self.index(len)?);
        self.line(indent, &format!("acc = acc + {x}[{u}] * {y}[{v}];"));
        self.new_array(x, len);
        self.new_array(y, len);
        Ok(())
    }

    /// One statement at indentation `indent`.
    fn stmt(&mut self, indent: usize) -> Result<()> {
        let choice: u8 = self.u.int_in_range(0..=22)?;
        match choice {
            6 if self.loop_depth < self.cfg.max_loop_depth => self.for_loop(indent),
            7 if self.loop_depth < self.cfg.max_loop_depth => self.counted_while(indent),
            8 if self.loop_depth < self.cfg.max_loop_depth => self.data_while(indent),
            20 if self.cfg.carried_arrays && self.loop_depth < self.cfg.max_loop_depth => {
                self.carried_loop(indent)
            }
            9 | 10 => self.array_stmt(indent),
            11 => {
                let arrays = self.arrays();
                if arrays.is_empty() || !self.bulk_stmt(indent, &arrays)? {
                    self.array_stmt(indent)?;
                }
                Ok(())
            }
            12 if self.loop_depth > 0 => {
                // An early return from inside a loop (maybe nested).
                self.note("return-in-loop");
                let c = self.cond(1)?;
                let e = self.expr(1)?;
                self.line(indent, &format!("if {c} {{"));
                self.line(indent + 1, &format!("return acc + {e};"));
                self.line(indent, "}");
                Ok(())
            }
            13 => self.array_call(indent),
            14 => self.fn_tuple(indent),
            15 if self.extra.wide > 0 => self.wide_call(indent),
            16 if self.one_in(3)? => self.branches(indent),
            17 => self.matrix(indent),
            18 | 19 => self.fn_value_stmt(indent),
            5 | 16 => self.if_stmt(indent),
            3 | 4 | 12 => self.assign(indent),
            2 => {
                self.note("let mut");
                let name = self.name("m");
                let e = self.expr(0)?;
                self.line(indent, &format!("let mut {name} = {e};"));
                self.push(Var::F64 {
                    name,
                    mutable: true,
                });
                Ok(())
            }
            _ => {
                self.note("let");
                let name = self.name("v");
                let e = self.expr(0)?;
                self.line(indent, &format!("let {name} = {e};"));
                self.push(Var::F64 {
                    name,
                    mutable: false,
                });
                Ok(())
            }
        }
    }

    /// `if c { .. }`, maybe with `else { .. }`.
    fn if_stmt(&mut self, indent: usize) -> Result<()> {
        let c = self.cond(1)?;
        self.line(indent, &format!("if {c} {{"));
        self.block(indent + 1, 2)?;
        if self.u.arbitrary::<bool>()? {
            self.note("if-else");
            self.line(indent, "} else {");
            self.block(indent + 1, 2)?;
        } else {
            self.note("if");
        }
        self.line(indent, "}");
        Ok(())
    }

    /// A function value chosen at run time, then called.
    fn fn_value_stmt(&mut self, indent: usize) -> Result<()> {
        self.note("fn-value-chosen");
        let g = self.name("g");
        let c = self.cond(1)?;
        let f1 = self.fn_value()?;
        let f2 = self.fn_value()?;
        self.line(
            indent,
            &format!("let {g} = if {c} {{ {f1} }} else {{ {f2} }};"),
        );
        if let Some(m) = self.pick_mut()? {
            let e = self.expr(1)?;
            self.line(indent, &format!("{m} = {m} + {g}({e});"));
        }
        Ok(())
    }

    /// A `for` loop over a bound, with one to three statements.
    fn for_loop(&mut self, indent: usize) -> Result<()> {
        self.note(if self.loop_depth > 0 {
            "for-nested"
        } else {
            "for"
        });
        let i = self.name("i");
        let (bound, max) = self.bound()?;
        self.line(indent, &format!("for {i} in 0..{bound} {{"));
        self.loop_depth += 1;
        self.scopes.push(vec![Var::I64 {
            name: i,
            bound: max,
        }]);
        let n = self.u.int_in_range(1..=3)?;
        for _ in 0..n {
            self.stmt(indent + 1)?;
        }
        // Sometimes a per-loop checkpointing override (docs/language.md):
        // reverse mode then replays the loop in stretches of `k` iterations,
        // which must not change the gradient.
        if self.one_in(6)? {
            let k: u8 = self.u.int_in_range(0..=3)?;
            self.line(indent + 1, &format!("checkpoint({k});"));
        }
        self.scopes.pop();
        self.loop_depth -= 1;
        self.line(indent, "}");
        Ok(())
    }

    /// A `while` loop that counts to a constant.
    fn counted_while(&mut self, indent: usize) -> Result<()> {
        self.note("while-counted");
        let w = self.name("w");
        let count: u8 = self.u.int_in_range(0..=3)?;
        self.line(indent, &format!("let mut {w} = 0;"));
        self.line(indent, &format!("while {w} < {count} {{"));
        self.loop_depth += 1;
        self.scopes.push(Vec::new());
        self.stmt(indent + 1)?;
        self.scopes.pop();
        self.loop_depth -= 1;
        self.line(indent + 1, &format!("{w} = {w} + 1;"));
        self.line(indent, "}");
        Ok(())
    }

    /// A `while` loop that a condition on data ends, bounded by a counter
    /// incremented first (so `continue` cannot skip it), with a
    /// data-dependent `break` or `continue` among its statements.
    fn data_while(&mut self, indent: usize) -> Result<()> {
        self.note("while-data-exit");
        let w = self.name("w");
        let count: u8 = self.u.int_in_range(1..=6)?;
        let c = self.cond(1)?;
        self.line(indent, &format!("let mut {w} = 0;"));
        self.line(indent, &format!("while {w} < {count} && {c} {{"));
        self.line(indent + 1, &format!("{w} = {w} + 1;"));
        self.loop_depth += 1;
        self.scopes.push(vec![Var::I64 {
            name: w,
            bound: usize::from(count) + 1,
        }]);
        let n = self.u.int_in_range(1..=3)?;
        for _ in 0..n {
            self.stmt(indent + 1)?;
            if self.one_in(3)? {
                let exit = if self.u.arbitrary::<bool>()? {
                    "break"
                } else {
                    "continue"
                };
                self.note(exit);
                let c = self.cond(1)?;
                self.line(indent + 1, &format!("if {c} {{ {exit}; }}"));
            }
        }
        self.scopes.pop();
        self.loop_depth -= 1;
        self.line(indent, "}");
        Ok(())
    }

    /// The hand-over line of [`Gen::carried_loop`]: with `keep_new`
    /// (the best array and the new one), under a condition, the best taken
    /// from the new array inside it or after it; otherwise, where `may_skip`
    /// (no handing chain), under a condition one time in three.
    fn hand_over(
        &mut self,
        indent: usize,
        hand_over: &str,
        keep_new: Option<(&str, &str)>,
        may_skip: bool,
    ) -> Result<()> {
        if let Some((kp, d)) = keep_new {
            self.note("carried-hand-over-sometimes");
            self.note("carried-kept-best-new");
            let (cond, cond2) = (self.cond(1)?, self.cond(1)?);
            let take = format!("if {cond2} {{ {kp} = {d}; }}");
            if self.u.arbitrary::<bool>()? {
                self.line(indent, &format!("if {cond} {{ {hand_over} {take} }}"));
            } else {
                self.line(indent, &format!("if {cond} {{ {hand_over} }}"));
                self.line(indent, &take);
            }
        } else if may_skip && self.one_in(3)? {
            self.note("carried-hand-over-sometimes");
            let cond = self.cond(1)?;
            self.line(indent, &format!("if {cond} {{ {hand_over} }}"));
        } else {
            self.line(indent, hand_over);
        }
        Ok(())
    }

    /// A `while` loop carrying an array from one iteration to the next
    /// ([`Config::carried_arrays`]): started from a copy of an array in
    /// scope, each iteration copies it, writes the copy from the old one,
    /// runs up to two statements and hands the copy on (on some iterations
    /// only, under a condition, one loop in three), maybe leaving by a
    /// data-dependent `break` before or after the hand-over, or by a second
    /// part of its condition; the array is read after the loop and stays in
    /// scope, so a later loop may start from it. One loop in four of the
    /// others keeps the previous array too (`p = c; c = d;`, a handing
    /// chain), started from a copy, the array itself or the carried array,
    /// read in the copy's update and, one time in four, after the loop. One
    /// in five of those without a tuple keeps a best array by reference
    /// (`if cond { k = c; }` before or after the hand-over; or, one time
    /// in four after it, from the new array beside a hand-over on some
    /// iterations only: `if cond { c = d; if cond2 { k = d; } }`, the
    /// inner test inside or after the outer), started likewise and read
    /// after the loop one time in two; a loop leaving after the hand-over
    /// and keeping the best after it leaves between the two one time in
    /// two; one keeping a best array in four loops `while true`, leaving
    /// after the hand-over by a break testing its count too. An array
    /// statement when there is no array.
    fn carried_loop(&mut self, indent: usize) -> Result<()> {
        let arrays = self.arrays();
        if arrays.is_empty() {
            return self.array_stmt(indent);
        }
        let (a, len, _) = self.u.choose(&arrays)?.clone();
        // One loop in four with room for a loop inside swaps a double
        // buffer inside it instead (since session 40).
        if self.loop_depth + 1 < self.cfg.max_loop_depth && self.one_in(4)? {
            return self.swap_inside(indent, &a, len);
        }
        let (c, w, d) = (self.name("c"), self.name("w"), self.name("d"));
        let count: u8 = self.u.int_in_range(0..=6)?;
        // One loop in four carries the array in a tuple with a scalar.
        let tuple = self.one_in(4)?.then(|| self.name("st"));
        let cur = match &tuple {
            Some(st) => {
                self.note("carried-tuple");
                self.line(indent, &format!("let mut {st} = (copy({a}), 0.0);"));
                format!("{st}.0")
            }
            None => {
                self.line(indent, &format!("let mut {c} = copy({a});"));
                self.new_array(c.clone(), len);
                c.clone()
            }
        };
        // One loop in four (of those without a tuple) keeps the previous
        // array: `p = c; c = d;`, its hand-over never conditional.
        let prev = match tuple.is_none() && self.one_in(4)? {
            true => {
                self.note("carried-handed");
                let p = self.name("p");
                let start = match self.u.int_in_range(0..=2u8)? {
                    0 => format!("copy({a})"),
                    1 => a.clone(),
                    _ => c.clone(),
                };
                self.line(indent, &format!("let mut {p} = {start};"));
                Some(p)
            }
            false => None,
        };
        // One loop in five without a tuple keeps a best array by reference
        // (`if cond { k = c; }` before or after the hand-over): at the
        // header `k` may hold `c`'s array, or the one it entered with, or,
        // beside a handing chain, the previous array's (since session 34).
        let keep = match tuple.is_none() && self.one_in(5)? {
            true => {
                self.note("carried-kept-best");
                let kp = self.name("kp");
                let start = match self.u.int_in_range(0..=2u8)? {
                    0 => format!("copy({a})"),
                    1 => a.clone(),
                    _ => c.clone(),
                };
                self.line(indent, &format!("let mut {kp} = {start};"));
                self.new_array(kp.clone(), len);
                Some(kp)
            }
            false => None,
        };
        let keep2 = match &keep {
            Some(_) if prev.is_none() && self.one_in(3)? => {
                self.note("carried-kept-best-two");
                let kq = self.name("kq");
                self.line(indent, &format!("let mut {kq} = copy({a});"));
                self.new_array(kq.clone(), len);
                Some(kq)
            }
            _ => None,
        };
        let (forever, stop) = self.carried_header(indent, &w, count, keep.is_some())?;
        self.line(indent + 1, &format!("{w} = {w} + 1;"));
        self.loop_depth += 1;
        self.scopes.push(vec![Var::I64 {
            name: w,
            bound: usize::from(count) + 1 + usize::from(forever),
        }]);
        let (i, j) = (self.index(len)?, self.index(len)?);
        let e = self.expr(1)?;
        self.carried_step(indent + 1, &d, &cur)?;
        let old = match &prev {
            Some(p) => format!(" + 0.25 * {p}[{}]", self.index(len)?),
            None => String::new(),
        };
        self.line(
            indent + 1,
            &format!("{d}[{i}] = {cur}[{j}] * 0.5 + 0.5 * tanh({e}){old};"),
        );
        self.new_array(d.clone(), len);
        let n = self.u.int_in_range(0..=2)?;
        for _ in 0..n {
            self.stmt(indent + 1)?;
        }
        let exit: u8 = match forever {
            true => 2,
            false => self.u.int_in_range(0..=2)?,
        };
        if exit == 1 {
            self.break_if(indent + 1, "carried-break-before-hand-over", "")?;
        }
        if let Some(st) = &tuple
            && self.extra.remake
            && self.one_in(2)?
        {
            self.note("carried-tuple-whole");
            self.line(indent + 1, &format!("acc = acc + 0.25 * norm_t({st});"));
        }
        let by_call = tuple.is_some() && self.extra.remake && !self.one_in(4)?;
        let hand_over = match (&tuple, &prev) {
            (Some(st), _) if by_call => {
                let step = match self.u.arbitrary::<bool>()? {
                    true => {
                        self.note("carried-tuple-kept-by-call");
                        "touch_t"
                    }
                    false => {
                        self.note("carried-tuple-by-call");
                        "remake_t"
                    }
                };
                let s = format!("{st}.1 + 0.25 * tanh({d}[{i}])");
                if self.u.arbitrary::<bool>()? {
                    // The result's array field read again in an inner loop
                    // the call is not in: the same array on each of its
                    // iterations (a review's finding of session 32).
                    self.note("carried-tuple-field-reread");
                    let (r, b, j) = (self.name("r"), self.name("rb"), self.name("j"));
                    let m: u8 = self.u.int_in_range(0..=3)?;
                    let k = self.index(len)?;
                    format!(
                        "let {r} = {step}({d}, {s}); let mut {b} = {d}; for {j} in 0..{m} {{ {b} = {r}.0; {b}[{k}] = {b}[{i}] * 0.5 + 0.25 * tanh({r}.1); }} {st} = ({b}, {r}.1);"
                    )
                } else {
                    format!("{st} = {step}({d}, {s});")
                }
            }
            (Some(st), _) => format!("{st} = ({d}, {st}.1 + 0.25 * tanh({d}[{i}]));"),
            (None, Some(p)) => format!("{p} = {c}; {c} = {d};"),
            (None, None) => format!("{c} = {d};"),
        };
        // The best array taken before the hand-over (the array the
        // iteration started with) or after it (the new one).
        let keep_before = match &keep {
            Some(kp) if self.u.arbitrary::<bool>()? => {
                self.note("carried-kept-best-before");
                let cond = self.cond(1)?;
                self.line(indent + 1, &format!("if {cond} {{ {kp} = {c}; }}"));
                true
            }
            _ => false,
        };
        // One in four loops keeping a best array after the hand-over
        // hands over on some iterations only and takes the best from the
        // new array itself (`kp = d`), inside the hand-over's condition or
        // after it: two phis replaced on some iterations may take one
        // array (since session 36).
        let keep_new = match &keep {
            Some(kp) if prev.is_none() && tuple.is_none() && !keep_before && self.one_in(4)? => {
                Some(kp.clone())
            }
            _ => None,
        };
        self.hand_over(
            indent + 1,
            &hand_over,
            keep_new.as_deref().map(|kp| (kp, d.as_str())),
            prev.is_none(),
        )?;
        let keep_after = keep.as_ref().filter(|_| !keep_before && keep_new.is_none());
        // One in two loops keeping a best array after the hand-over and
        // leaving after both leave between the two (since session 37).
        let between = exit == 2 && keep_after.is_some() && (forever || self.one_in(2)?);
        if between {
            self.break_if(indent + 1, "carried-break-before-kept-best", &stop)?;
        }
        if let Some(kp) = keep_after {
            let cond = self.cond(1)?;
            // Without a handing chain, one in three swaps the best and the
            // current array (`c` takes the old best): the header's phis
            // hold one array between them either way (since session 35).
            if prev.is_none() && self.one_in(3)? {
                self.note("carried-kept-best-swap");
                let t = self.name("t");
                self.line(
                    indent + 1,
                    &format!("if {cond} {{ let {t} = {kp}; {kp} = {c}; {c} = {t}; }}"),
                );
            } else {
                self.line(indent + 1, &format!("if {cond} {{ {kp} = {c}; }}"));
            }
        }
        // One in three keeps a second best array (the lowest and the
        // highest): three header phis may hold one array (since session
        // 35).
        if let Some(kq) = &keep2 {
            let cond = self.cond(1)?;
            self.line(indent + 1, &format!("if {cond} {{ {kq} = {c}; }}"));
        }
        if exit == 2 && !between {
            self.break_if(indent + 1, "carried-break-after-hand-over", &stop)?;
        }
        self.scopes.pop();
        self.loop_depth -= 1;
        self.line(indent, "}");
        if let Some(st) = &tuple {
            self.line(indent, &format!("acc = acc + 0.25 * tanh({st}.1);"));
            self.line(indent, &format!("let {c} = {st}.0;"));
            self.new_array(c.clone(), len);
        }
        let k = self.index(len)?;
        self.line(indent, &format!("acc = acc + 0.5 * tanh({c}[{k}]);"));
        if let Some(p) = &prev
            && self.one_in(4)?
        {
            let k = self.index(len)?;
            self.line(indent, &format!("acc = acc + 0.25 * tanh({p}[{k}]);"));
        }
        for kp in keep.iter().chain(&keep2) {
            if self.u.arbitrary::<bool>()? {
                let k = self.index(len)?;
                self.line(indent, &format!("acc = acc + 0.25 * tanh({kp}[{k}]);"));
            }
        }
        // Whether the previous array is the current one (a call may have
        // handed it back): the primitive `same`.
        if let Some(p) = &prev
            && self.one_in(2)?
        {
            self.note("carried-handed-same");
            self.line(
                indent,
                &format!("if same({p}, {c}) {{ acc = acc + 0.125; }}"),
            );
        }
        Ok(())
    }

    /// The carried loop's counter `w` and its header, counting to `count`:
    /// one loop in four keeping a best array (`keeps`) loops `while true`,
    /// its count tested by its break after the hand-over (before the best's
    /// choice where that comes after), so that its header phis leave only
    /// through the body's (since session 37). Whether it does, and the test
    /// its break starts with then (`w > count || `).
    fn carried_header(
        &mut self,
        indent: usize,
        w: &str,
        count: u8,
        keeps: bool,
    ) -> Result<(bool, String)> {
        self.line(indent, &format!("let mut {w} = 0;"));
        let forever = keeps && self.one_in(4)?;
        if forever {
            self.note("carried-while-true");
            self.line(indent, "while true {");
            return Ok((true, format!("{w} > {count} || ")));
        }
        if self.one_in(3)? {
            self.note("carried-while-and");
            let cond = self.cond(1)?;
            self.line(indent, &format!("while {w} < {count} && {cond} {{"));
        } else {
            self.note("carried-while");
            self.line(indent, &format!("while {w} < {count} {{"));
        }
        Ok((false, String::new()))
    }

    /// `if STOP COND { break; }`, noting `feature` (`stop`: a test of the
    /// loop's count and `||`, or nothing).
    fn break_if(&mut self, indent: usize, feature: &'static str, stop: &str) -> Result<()> {
        self.note(feature);
        let cond = self.cond(1)?;
        self.line(indent, &format!("if {stop}{cond} {{ break; }}"));
        Ok(())
    }

    /// The carried loop's new array `d`, made from the current one: by
    /// `copy`, or, when the program has the helpers, by a call that makes
    /// it afresh (`remake`), keeps it (`touch`) or does either (`either`).
    fn carried_step(&mut self, indent: usize, d: &str, cur: &str) -> Result<()> {
        // A function that returns a new array makes it afresh, as `copy`
        // does; one that returns its argument keeps it (docs/reverse.md,
        // "Arrays made by a call").
        match self.extra.remake.then(|| self.u.int_in_range(0..=3u8)) {
            Some(Ok(1)) => {
                self.note("carried-remade-by-call");
                let s = self.expr(1)?;
                self.line(indent, &format!("let {d} = remake({cur}, {s});"));
            }
            Some(Ok(2)) => {
                self.note("carried-kept-through-call");
                let s = self.expr(1)?;
                self.line(indent, &format!("let {d} = touch({cur}, {s});"));
            }
            Some(Ok(3)) => {
                self.note("carried-either-way-by-call");
                let s = self.expr(1)?;
                self.line(indent, &format!("let {d} = either({cur}, {s});"));
            }
            Some(Err(e)) => return Err(e),
            _ => self.line(indent, &format!("let {d} = copy({cur});")),
        }
        Ok(())
    }

    /// A call of a helper taking arrays (`mix`, maybe with one array twice;
    /// `reca`) into a mutable local, or an alias of an array; an array
    /// statement when there is none of these.
    fn array_call(&mut self, indent: usize) -> Result<()> {
        let arrays = self.arrays();
        let muts = self.mut_vars();
        if arrays.is_empty() || muts.is_empty() {
            return self.array_stmt(indent);
        }
        let m = self.u.choose(&muts)?.clone();
        let (a, _, _) = self.u.choose(&arrays)?.clone();
        match self.u.int_in_range(0..=2u8)? {
            0 if self.extra.mix => {
                let (b, _, _) = if self.u.arbitrary::<bool>()? {
                    self.note("call-mix-aliased");
                    (a.clone(), 0, 0)
                } else {
                    self.note("call-mix (two arrays)");
                    self.u.choose(&arrays)?.clone()
                };
                let e = self.expr(1)?;
                self.line(indent, &format!("{m} = {m} + mix({a}, {b}, {e});"));
            }
            1 if self.extra.reca => {
                self.note("call-reca (recursion with an array)");
                let e = self.expr(1)?;
                let d: u8 = self.u.int_in_range(0..=5)?;
                self.line(
                    indent,
                    &format!("{m} = {m} + 0.1 * tanh(reca(tanh({e}), {a}, {d}));"),
                );
            }
            _ => {
                self.note("array-alias (let b = a)");
                let (a, len, id) = self.u.choose(&arrays)?.clone();
                let b = self.name("al");
                self.line(indent, &format!("let {b} = {a};"));
                self.push(Var::Array { name: b, len, id });
            }
        }
        Ok(())
    }

    /// A function value kept in a tuple and called from it, or through
    /// `applyt`/`pickf`.
    fn fn_tuple(&mut self, indent: usize) -> Result<()> {
        let Some(m) = self.pick_mut()? else {
            return Ok(());
        };
        let e = self.expr(1)?;
        match self.u.int_in_range(0..=2u8)? {
            0 if self.extra.fn_tuples => {
                self.note("call-applyt (tuple with a fn)");
                let f = self.fn_value()?;
                self.line(indent, &format!("{m} = {m} + applyt(({f}, {e}));"));
            }
            1 if self.extra.fn_tuples => {
                self.note("call-pickf (fn returned in a tuple)");
                let c = self.cond(1)?;
                let t = self.name("pf");
                self.line(indent, &format!("let {t} = pickf({c});"));
                self.line(indent, &format!("{m} = {m} + {t}.0({e}) * {t}.1;"));
            }
            _ => {
                self.note("fn-value-in-tuple");
                let t = self.name("ft");
                let f1 = self.fn_value()?;
                let f2 = self.fn_value()?;
                let k = self.literal()?;
                self.line(indent, &format!("let {t} = ({f1}, {k}, {f2});"));
                let g = self.name("g");
                self.line(indent, &format!("let {g} = {t}.2;"));
                // In smooth programs the function value sees `tanh` of the
                // accumulator: a squaring helper applied to the accumulator
                // itself, in a loop, reaches 1e16 in four rounds, and the
                // derivative checks then see rounding, not derivatives
                // (fuzzgen/tests/regressions/derivatives-runner-2000424985.irad).
                let arg = if self.cfg.smooth {
                    format!("tanh({m})")
                } else {
                    m.clone()
                };
                self.line(
                    indent,
                    &format!("{m} = {m} + {t}.0({e}) * {t}.1 + {g}({arg});"),
                );
            }
        }
        Ok(())
    }

    /// `let tw = wide(e0, .., eK-1);`: a large tuple whose fields are then
    /// leaves of expressions.
    fn wide_call(&mut self, indent: usize) -> Result<()> {
        self.note("call-wide (large tuple)");
        let k = self.extra.wide;
        let mut args = Vec::with_capacity(k);
        for _ in 0..k {
            args.push(if self.u.arbitrary::<bool>()? {
                self.leaf()?
            } else {
                self.expr(2)?
            });
        }
        let t = self.name("tw");
        self.line(indent, &format!("let {t} = wide({});", args.join(", ")));
        self.push(Var::Tuple { name: t, len: k });
        Ok(())
    }

    /// Many branches: an `if`/`else if` chain or a run of `if`s, each arm
    /// updating a mutable local, on thresholds of one value.
    fn branches(&mut self, indent: usize) -> Result<()> {
        let Some(m) = self.pick_mut()? else {
            return Ok(());
        };
        let v = self.expr(1)?;
        let x = self.name("br");
        self.line(indent, &format!("let {x} = tanh({v});"));
        // Mostly a few arms, sometimes many.
        let arms: usize = if self.one_in(6)? {
            self.u.int_in_range(13..=40)?
        } else {
            self.u.int_in_range(3..=12)?
        };
        let chain = self.u.arbitrary::<bool>()?;
        self.note(if chain {
            "if-chain (else if)"
        } else {
            "if-run (many ifs)"
        });
        for k in 0..arms {
            let threshold = -1.0 + 2.0 * (k as f64 + 0.5) / arms as f64;
            let head = if k == 0 || !chain { "if" } else { "} else if" };
            let op = *self.u.choose(&["<", ">="])?;
            if !chain && k > 0 {
                self.line(indent, "}");
            }
            self.line(indent, &format!("{head} {x} {op} {threshold:.4} {{"));
            let e = self.literal()?;
            self.line(indent + 1, &format!("{m} = {m} * 0.9 + {e};"));
        }
        if chain && self.u.arbitrary::<bool>()? {
            self.line(indent, "} else {");
            let e = self.expr(1)?;
            self.line(indent + 1, &format!("{m} = {m} + {e};"));
        }
        self.line(indent, "}");
        Ok(())
    }

    /// A matrix and a vector made to fit `matvec`/`matmul` with an array in
    /// scope (or of their own), filled from data.
    fn matrix(&mut self, indent: usize) -> Result<()> {
        self.note("matrix-setup");
        let arrays = self.arrays();
        let n = if !arrays.is_empty() && self.u.arbitrary::<bool>()? {
            self.u.choose(&arrays)?.1
        } else {
            self.u.int_in_range(1..=3)?
        };
        let m: usize = self.u.int_in_range(1..=3)?;
        let mat = self.name("mat");
        let e = self.expr(1)?;
        self.line(indent, &format!("let {mat} = zeros({});", m * n));
        let i = self.name("i");
        self.line(indent, &format!("for {i} in 0..{} {{", m * n));
        self.line(
            indent + 1,
            &format!("{mat}[{i}] = tanh({e} + 0.3 * f64({i}));"),
        );
        self.line(indent, "}");
        self.new_array(mat.clone(), m * n);
        let (x, k) = match arrays.iter().find(|(_, len, _)| *len == n) {
            Some((x, _, _)) if self.u.arbitrary::<bool>()? => (x.clone(), 1),
            _ => {
                // A matrix of n rows and k columns to multiply by.
                let k: usize = self.u.int_in_range(1..=3)?;
                let x = self.name("rhs");
                let e = self.expr(1)?;
                self.line(indent, &format!("let {x} = zeros({});", n * k));
                self.line(indent, &format!("fill({x}, tanh({e}));"));
                self.new_array(x.clone(), n * k);
                (x, k)
            }
        };
        let out = self.name("vec");
        self.line(indent, &format!("let {out} = zeros({});", m * k));
        if k == 1 && self.u.arbitrary::<bool>()? {
            self.note("bulk-matvec");
            self.line(indent, &format!("matvec({mat}, {x}, {m}, {n}, {out});"));
        } else {
            self.note("bulk-matmul");
            self.line(
                indent,
                &format!("matmul({mat}, {x}, {m}, {n}, {k}, {out});"),
            );
        }
        if let Some(mv) = self.pick_mut()? {
            self.note("bulk-dot");
            self.line(
                indent,
                &format!("{mv} = {mv} + 0.1 * tanh(dot({out}, {out}));"),
            );
        }
        self.new_array(out, m * k);
        Ok(())
    }

    /// A nested block of at most `n` statements, in a scope of its own.
    fn block(&mut self, indent: usize, n: usize) -> Result<()> {
        self.scopes.push(Vec::new());
        let k = self.u.int_in_range(1..=n)?;
        for _ in 0..k {
            self.stmt(indent)?;
        }
        self.scopes.pop();
        Ok(())
    }

    fn pick_mut(&mut self) -> Result<Option<String>> {
        let muts = self.mut_vars();
        if muts.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.u.choose(&muts)?.clone()))
    }

    /// `m = e;`, `m = m + e;` or `m = m * e;` of a mutable local.
    fn assign(&mut self, indent: usize) -> Result<()> {
        let Some(m) = self.pick_mut()? else {
            return Ok(());
        };
        self.note("assign");
        let e = self.expr(0)?;
        let text = match self.u.int_in_range(0..=2)? {
            0 => format!("{m} = {e};"),
            1 => format!("{m} = {m} + {e};"),
            // A product stays bounded: the factor is in (0.5, 1.5).
            _ => format!("{m} = {m} * (1.0 + 0.5 * tanh({e}));"),
        };
        self.line(indent, &text);
        Ok(())
    }

    /// A loop bound: its text and its largest value.
    fn bound(&mut self) -> Result<(String, usize)> {
        let ints = self.ints();
        let arrays = self.arrays();
        Ok(match self.u.int_in_range(0..=2)? {
            0 if !arrays.is_empty() => {
                let (a, len, _) = self.u.choose(&arrays)?.clone();
                (format!("len({a})"), len)
            }
            1 if ints.iter().any(|(n, _)| n == "n") => ("n".into(), 5),
            _ => {
                let k: u8 = self.u.int_in_range(0..=4)?;
                (k.to_string(), usize::from(k))
            }
        })
    }

    /// An i64 index into an array of length `len` (>= 1), always in range.
    fn index(&mut self, len: usize) -> Result<String> {
        let ints = self.ints();
        let usable: Vec<(String, usize)> = ints.into_iter().filter(|(n, _)| n != "n").collect();
        if !usable.is_empty() && self.u.arbitrary::<bool>()? {
            let (i, _) = self.u.choose(&usable)?.clone();
            let k: u8 = self.u.int_in_range(0..=3)?;
            return Ok(format!("({i} + {k}) % {len}"));
        }
        let k = self.u.int_in_range(0..=len - 1)?;
        Ok(k.to_string())
    }

    /// An array statement: a local array, or a write into an array.
    fn array_stmt(&mut self, indent: usize) -> Result<()> {
        let arrays = self.arrays();
        if arrays.is_empty() || self.u.arbitrary::<bool>()? {
            self.note("array-local");
            let b = self.name("arr");
            if !arrays.is_empty() && self.one_in(4)? {
                let (a, len, _) = self.u.choose(&arrays)?.clone();
                self.line(indent, &format!("let {b} = copy({a});"));
                self.new_array(b, len);
                return Ok(());
            }
            // Often as long as an array in scope, so bulk primitives fit.
            let len = if !arrays.is_empty() && self.u.arbitrary::<bool>()? {
                self.u.choose(&arrays)?.1
            } else {
                self.u.int_in_range(1..=4)?
            };
            if self.u.arbitrary::<bool>()? {
                self.line(indent, &format!("let {b}: [f64] = alloc({len});"));
            } else {
                self.line(indent, &format!("let {b} = zeros({len});"));
            }
            self.new_array(b, len);
            return Ok(());
        }
        if self.u.arbitrary::<bool>()? && self.bulk_stmt(indent, &arrays)? {
            return Ok(());
        }
        self.note("array-write");
        let (a, len, _) = self.u.choose(&arrays)?.clone();
        let i = self.index(len)?;
        let e = self.expr(1)?;
        if self.u.arbitrary::<bool>()? {
            let j = self.index(len)?;
            self.line(indent, &format!("{a}[{i}] = {a}[{j}] * 0.5 + {e};"));
        } else {
            self.line(indent, &format!("{a}[{i}] = {e};"));
        }
        Ok(())
    }

    /// A bulk array statement on arrays in scope whose lengths fit (docs/ir.md,
    /// "Bulk array primitives"); false when the chosen one has no arrays that
    /// fit. Outputs are other arrays than inputs (not aliases of them), except,
    /// rarely and not in smooth programs, on purpose: a bulk primitive must
    /// then fail with its shape error in every backend. Factors are bounded
    /// (`tanh`), so repeated updates in loops stay finite.
    fn bulk_stmt(&mut self, indent: usize, arrays: &[ArrayVar]) -> Result<bool> {
        let aliased = !self.cfg.smooth && self.one_in(16)?;
        let apart = |x: usize, y: usize| (x != y) != aliased;
        let pairs: Vec<(&String, &String)> = arrays
            .iter()
            .flat_map(|(a, la, ia)| {
                arrays
                    .iter()
                    .filter(move |(_, lb, ib)| apart(*ia, *ib) && lb == la)
                    .map(move |(b, _, _)| (a, b))
            })
            .collect();
        let (text, feature) = match self.u.int_in_range(0..=5u8)? {
            0 if !pairs.is_empty() => {
                let (x, y) = *self.u.choose(&pairs)?;
                let e = self.expr(1)?;
                (format!("axpy(tanh({e}), {x}, {y});"), "bulk-axpy")
            }
            1 => {
                let (x, _, _) = self.u.choose(arrays)?;
                let e = self.expr(1)?;
                (format!("scale(0.5 + 0.5 * tanh({e}), {x});"), "bulk-scale")
            }
            2 => {
                let (a, _, _) = self.u.choose(arrays)?;
                let e = self.expr(1)?;
                (format!("fill({a}, {e});"), "bulk-fill")
            }
            3 if !pairs.is_empty() => {
                let (d, src) = *self.u.choose(&pairs)?;
                (format!("copyto({d}, {src});"), "bulk-copyto")
            }
            4 => {
                // matvec(A, x, m, n, y): |A| = m*n, |x| = n, |y| = m.
                let mut fits = Vec::new();
                for (a, la, ia) in arrays {
                    for (x, n, ix) in arrays {
                        for (y, m, iy) in arrays {
                            if apart(*iy, *ia) && apart(*iy, *ix) && m * n == *la {
                                fits.push(format!("matvec({a}, {x}, {m}, {n}, {y});"));
                            }
                        }
                    }
                }
                if fits.is_empty() {
                    return Ok(false);
                }
                (self.u.choose(&fits)?.clone(), "bulk-matvec")
            }
            5 => {
                // matmul(A, B, m, k, n, C) with dimensions up to 4.
                let mut fits = Vec::new();
                for (a, la, ia) in arrays {
                    for (b, lb, ib) in arrays {
                        for (c, lc, ic) in arrays {
                            if !apart(*ic, *ia) || !apart(*ic, *ib) {
                                continue;
                            }
                            for m in 1..=4 {
                                for n in 1..=4 {
                                    let k = la / m;
                                    if m * k == *la && k * n == *lb && m * n == *lc {
                                        fits.push(format!("matmul({a}, {b}, {m}, {k}, {n}, {c});"));
                                    }
                                }
                            }
                        }
                    }
                }
                if fits.is_empty() {
                    return Ok(false);
                }
                (self.u.choose(&fits)?.clone(), "bulk-matmul")
            }
            _ => return Ok(false),
        };
        self.note(feature);
        if aliased && feature != "bulk-scale" && feature != "bulk-fill" {
            self.note("bulk-aliased (error path)");
        }
        self.line(indent, &text);
        Ok(true)
    }

    /// A function value of type `fn(f64) -> f64`.
    fn fn_value(&mut self) -> Result<String> {
        let mut options: Vec<String> = vec!["sin".into(), "tanh".into(), "atan".into()];
        options.extend((0..self.unary).map(|k| format!("u{k}")));
        Ok(self.u.choose(&options)?.clone())
    }

    /// A bool condition.
    fn cond(&mut self, depth: u32) -> Result<String> {
        let choice: u8 = self.u.int_in_range(0..=6)?;
        let ints = self.ints();
        Ok(match choice {
            0 if depth < 2 => {
                let a = self.cond(depth + 1)?;
                let b = self.cond(depth + 1)?;
                let op = if self.u.arbitrary::<bool>()? {
                    "&&"
                } else {
                    "||"
                };
                format!("({a} {op} {b})")
            }
            1 if depth < 2 => format!("!({})", self.cond(depth + 1)?),
            // The primitives, which evaluate both operands.
            2 if depth < 2 => {
                let a = self.cond(depth + 1)?;
                let b = self.cond(depth + 1)?;
                let op = *self.u.choose(&["and", "or"])?;
                format!("{op}({a}, {b})")
            }
            3 if !ints.is_empty() => {
                let (i, _) = self.u.choose(&ints)?.clone();
                let k: u8 = self.u.int_in_range(0..=3)?;
                let op = *self.u.choose(&["<", "<", "==", "!="])?;
                format!("{i} {op} {k}")
            }
            _ => {
                let a = self.expr(self.cfg.max_expr_depth.saturating_sub(1))?;
                let b = self.literal()?;
                let op = *self.u.choose(&["<", "<=", ">", ">=", "<", ">", "!="])?;
                format!("{a} {op} {b}")
            }
        })
    }

    /// An f64 expression at nesting depth `depth`.
    fn expr(&mut self, depth: u32) -> Result<String> {
        if depth >= self.cfg.max_expr_depth || self.u.is_empty() {
            return self.leaf();
        }
        let choice: u8 = self.u.int_in_range(0..=12)?;
        let d = depth + 1;
        Ok(match choice {
            0..=2 => self.leaf()?,
            3 | 4 => {
                let a = self.expr(d)?;
                let b = self.expr(d)?;
                let op = *self.u.choose(&["+", "-", "*"])?;
                format!("({a} {op} {b})")
            }
            5 => {
                let a = self.expr(d)?;
                let b = self.expr(d)?;
                format!("({a} / (1.5 + tanh({b})))")
            }
            6 | 7 => {
                let smooth = self.cfg.smooth;
                let table: Vec<&(&str, &str, bool)> =
                    UNARY.iter().filter(|(_, _, s)| *s || !smooth).collect();
                let &&(name, wrap, _) = self.u.choose(&table)?;
                let a = self.expr(d)?;
                if name == "neg" {
                    format!("(-{a})")
                } else {
                    format!("{name}({})", wrap.replace("{}", &a))
                }
            }
            8 => {
                let smooth = self.cfg.smooth;
                let table: Vec<&(&str, &str, &str, bool)> =
                    BINARY.iter().filter(|(_, _, _, s)| *s || !smooth).collect();
                let &&(name, wa, wb, _) = self.u.choose(&table)?;
                let a = self.expr(d)?;
                let b = self.expr(d)?;
                format!("{name}({}, {})", wa.replace("{}", &a), wb.replace("{}", &b))
            }
            9 => {
                let a = self.expr(d)?;
                let k: i8 = self.u.int_in_range(-2..=3)?;
                format!("powi(1.5 + tanh({a}), {k})")
            }
            10 => self.call(d)?,
            11 if !self.cfg.smooth => match self.u.int_in_range(0..=3u8)? {
                2 => {
                    let c = self.cond(1)?;
                    let a = self.expr(d)?;
                    let b = self.expr(d)?;
                    format!("select({c}, {a}, {b})")
                }
                // Truncation through i64 (fails for NaN and huge values).
                3 => format!("f64(i64({}))", self.expr(d)?),
                _ => {
                    self.note("if-expr");
                    let c = self.cond(1)?;
                    let a = self.expr(d)?;
                    let b = self.expr(d)?;
                    format!("(if {c} {{ {a} }} else {{ {b} }})")
                }
            },
            _ => {
                let a = self.expr(d)?;
                let k = self.u.int_in_range(0..=1)?;
                format!("pair({a}).{k}")
            }
        })
    }

    /// A call of a helper, of `rec`, or through `apply`.
    fn call(&mut self, depth: u32) -> Result<String> {
        let choice: u8 = self.u.int_in_range(0..=3)?;
        Ok(match choice {
            0 if self.binary > 0 => {
                self.note("call-static");
                let k = self.u.int_in_range(0..=self.binary - 1)?;
                let a = self.expr(depth)?;
                let b = self.expr(depth)?;
                format!("b{k}({a}, {b})")
            }
            1 if self.unary > 0 => {
                self.note("call-static");
                let k = self.u.int_in_range(0..=self.unary - 1)?;
                let a = self.expr(depth)?;
                format!("u{k}({a})")
            }
            2 => {
                self.note("call-rec");
                let a = self.expr(depth)?;
                let d: u8 = self.u.int_in_range(0..=4)?;
                format!("rec(tanh({a}), {d})")
            }
            _ => {
                self.note("call-apply");
                let f = self.fn_value()?;
                let a = self.expr(depth)?;
                format!("apply({f}, {a})")
            }
        })
    }

    /// A variable, a literal, an array element or reduction, a field of a
    /// tuple of f64s or a converted integer.
    fn leaf(&mut self) -> Result<String> {
        let vars = self.f64_vars();
        let arrays = self.arrays();
        let ints = self.ints();
        let tuples = self.tuples();
        let choice: u8 = self.u.int_in_range(0..=6)?;
        Ok(match choice {
            0..=2 if !vars.is_empty() => self.u.choose(&vars)?.clone(),
            3 if !arrays.is_empty() => {
                let (a, len, _) = self.u.choose(&arrays)?.clone();
                match self.u.int_in_range(0..=3u8)? {
                    // Bulk reductions, scaled down: arrays may hold large values.
                    0 => {
                        self.note("bulk-sum");
                        format!("0.1 * tanh(sum({a}))")
                    }
                    1 => {
                        self.note("bulk-dot");
                        let same: Vec<&String> = arrays
                            .iter()
                            .filter(|(_, l, _)| *l == len)
                            .map(|(b, _, _)| b)
                            .collect();
                        let b = self.u.choose(&same)?;
                        format!("0.1 * tanh(dot({a}, {b}))")
                    }
                    _ => {
                        let i = self.index(len)?;
                        format!("{a}[{i}]")
                    }
                }
            }
            4 if !ints.is_empty() => {
                let (i, _) = self.u.choose(&ints)?.clone();
                // i64 arithmetic that cannot fail (constant divisors).
                let k: u8 = self.u.int_in_range(1..=3)?;
                match self.u.int_in_range(0..=5u8)? {
                    0 => format!("f64({i} * {k} - 1)"),
                    1 => format!("f64(-{i})"),
                    2 => format!("f64({i} / {k})"),
                    _ => format!("f64({i})"),
                }
            }
            5 if !tuples.is_empty() => {
                let (t, len) = self.u.choose(&tuples)?.clone();
                let k = self.u.int_in_range(0..=len - 1)?;
                format!("{t}.{k}")
            }
            _ => {
                if !vars.is_empty() && self.u.arbitrary::<bool>()? {
                    self.u.choose(&vars)?.clone()
                } else {
                    self.literal()?
                }
            }
        })
    }
}
