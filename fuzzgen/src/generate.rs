//! The program generator: from fuzzer bytes (an `arbitrary::Unstructured`),
//! a surface-language program (docs/language.md) that loads, verifies and
//! terminates, with arguments for its entry function `main`.
//!
//! Programs have helper functions (binary, unary, one returning a tuple, a
//! higher-order `apply`), a recursive function with a depth argument that
//! every call bounds, and `main(x0, .., a, n)` with f64 scalars, an optional
//! `[f64]` array and an optional small i64. `main`'s body mixes lets, mutable
//! locals, `if`/`else`, `for` loops over constants, `len(a)` and `n`, `while`
//! loops with counters, reads and in-place writes of the argument array and of
//! local arrays (`alloc`, `zeros`), tuples, static calls, dynamic calls
//! through function values chosen at run time, every f64 primitive, and the
//! bulk array primitives (`sum dot axpy scale fill copyto matvec matmul`) on
//! arrays whose lengths fit.
//!
//! Assumes nothing of the bytes: running out of them ends each choice at its
//! simplest option. Guarantees: the text loads without error (the generator
//! only writes well-typed, well-scoped code); every loop is bounded by a
//! small count, and recursion by a constant depth, so programs terminate;
//! primitives get operands inside their domains (`log(1.5 + tanh(e))`,
//! `asin(0.9 * tanh(e))`, divisors `1.5 + tanh(e)`, ...) and indices inside
//! their arrays, so most programs run without a run-time error (some still
//! stop with one, e.g. `i64()` of a huge value, and that is part of what is
//! tested). With `smooth` set, the non-smooth primitives (`abs`, `floor`,
//! `min`, comparisons feeding values, ...) are left out of the f64 data flow,
//! so finite differences apply away from branch points.

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
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_stmts: 12,
            max_expr_depth: 4,
            smooth: false,
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
}

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
        array_len: 0,
        loop_depth: 0,
    };
    g.helpers()?;
    let args = g.main()?;
    Ok(Program {
        source: g.out,
        func: "main".into(),
        args,
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
];

/// A variable in scope.
#[derive(Clone, Debug)]
enum Var {
    F64 { name: String, mutable: bool },
    I64 { name: String, bound: usize },
    Array { name: String, len: usize },
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
    /// The length of the argument array `a` (0: no array).
    array_len: usize,
    loop_depth: u32,
}

impl Gen<'_, '_> {
    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
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

    fn arrays(&self) -> Vec<(String, usize)> {
        self.vars()
            .filter_map(|v| match v {
                Var::Array { name, len } => Some((name.clone(), *len)),
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
        Ok(())
    }

    /// `main`'s signature, body and arguments.
    fn main(&mut self) -> Result<String> {
        let scalars = self.u.int_in_range(1..=3)?;
        let has_array = self.u.arbitrary::<bool>()?;
        let has_n = self.u.arbitrary::<bool>()?;
        let mut params = Vec::new();
        let mut args = Vec::new();
        let mut scope = Vec::new();
        for k in 0..scalars {
            params.push(format!("x{k}: f64"));
            let v: i16 = self.u.int_in_range(-2000..=2000)?;
            args.push(format!("{:.3}", f64::from(v) / 1000.0));
            scope.push(Var::F64 {
                name: format!("x{k}"),
                mutable: false,
            });
        }
        if has_array {
            self.array_len = self.u.int_in_range(1..=5)?;
            params.push("a: [f64]".into());
            let mut elems = Vec::new();
            for _ in 0..self.array_len {
                let v: i16 = self.u.int_in_range(-2000..=2000)?;
                elems.push(format!("{:.3}", f64::from(v) / 1000.0));
            }
            args.push(format!("[{}]", elems.join(", ")));
            scope.push(Var::Array {
                name: "a".into(),
                len: self.array_len,
            });
        }
        if has_n {
            params.push("n: i64".into());
            let n: u8 = self.u.int_in_range(0..=4)?;
            args.push(n.to_string());
            scope.push(Var::I64 {
                name: "n".into(),
                bound: 5,
            });
        }
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

    /// One statement at indentation `indent`.
    fn stmt(&mut self, indent: usize) -> Result<()> {
        let choice: u8 = self.u.int_in_range(0..=11)?;
        match choice {
            0 | 1 => {
                let name = self.name("v");
                let e = self.expr(0)?;
                self.line(indent, &format!("let {name} = {e};"));
                self.push(Var::F64 {
                    name,
                    mutable: false,
                });
            }
            2 => {
                let name = self.name("m");
                let e = self.expr(0)?;
                self.line(indent, &format!("let mut {name} = {e};"));
                self.push(Var::F64 {
                    name,
                    mutable: true,
                });
            }
            3 | 4 => self.assign(indent)?,
            5 => {
                let c = self.cond(1)?;
                self.line(indent, &format!("if {c} {{"));
                self.block(indent + 1, 2)?;
                if self.u.arbitrary::<bool>()? {
                    self.line(indent, "} else {");
                    self.block(indent + 1, 2)?;
                }
                self.line(indent, "}");
            }
            6 if self.loop_depth < 2 => {
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
                self.scopes.pop();
                self.loop_depth -= 1;
                self.line(indent, "}");
            }
            7 if self.loop_depth < 2 => {
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
            }
            8 | 10 => self.array_stmt(indent)?,
            11 => {
                let arrays = self.arrays();
                if arrays.is_empty() || !self.bulk_stmt(indent, &arrays)? {
                    self.array_stmt(indent)?;
                }
            }
            _ => {
                // A function value chosen at run time, then called.
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
            }
        }
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
                let (a, len) = self.u.choose(&arrays)?.clone();
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
            let b = self.name("arr");
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
            self.push(Var::Array { name: b, len });
            return Ok(());
        }
        if self.u.arbitrary::<bool>()? && self.bulk_stmt(indent, &arrays)? {
            return Ok(());
        }
        let (a, len) = self.u.choose(&arrays)?.clone();
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
    /// fit. Outputs are distinct from inputs (different arrays); factors are
    /// bounded (`tanh`), so repeated updates in loops stay finite.
    fn bulk_stmt(&mut self, indent: usize, arrays: &[(String, usize)]) -> Result<bool> {
        let pairs: Vec<(&String, &String)> = arrays
            .iter()
            .flat_map(|(a, la)| {
                arrays
                    .iter()
                    .filter(move |(b, lb)| b != a && lb == la)
                    .map(move |(b, _)| (a, b))
            })
            .collect();
        let text = match self.u.int_in_range(0..=5u8)? {
            0 if !pairs.is_empty() => {
                let (x, y) = *self.u.choose(&pairs)?;
                let e = self.expr(1)?;
                format!("axpy(tanh({e}), {x}, {y});")
            }
            1 => {
                let (x, _) = self.u.choose(arrays)?;
                let e = self.expr(1)?;
                format!("scale(0.5 + 0.5 * tanh({e}), {x});")
            }
            2 => {
                let (a, _) = self.u.choose(arrays)?;
                let e = self.expr(1)?;
                format!("fill({a}, {e});")
            }
            3 if !pairs.is_empty() => {
                let (d, src) = *self.u.choose(&pairs)?;
                format!("copyto({d}, {src});")
            }
            4 => {
                // matvec(A, x, m, n, y): |A| = m*n, |x| = n, |y| = m.
                let mut fits = Vec::new();
                for (a, la) in arrays {
                    for (x, n) in arrays {
                        for (y, m) in arrays {
                            if y != a && y != x && m * n == *la {
                                fits.push(format!("matvec({a}, {x}, {m}, {n}, {y});"));
                            }
                        }
                    }
                }
                if fits.is_empty() {
                    return Ok(false);
                }
                self.u.choose(&fits)?.clone()
            }
            5 => {
                // matmul(A, B, m, k, n, C) with dimensions up to 4.
                let mut fits = Vec::new();
                for (a, la) in arrays {
                    for (b, lb) in arrays {
                        for (c, lc) in arrays {
                            if c == a || c == b {
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
                self.u.choose(&fits)?.clone()
            }
            _ => return Ok(false),
        };
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
        let choice: u8 = self.u.int_in_range(0..=4)?;
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
            2 if !ints.is_empty() => {
                let (i, _) = self.u.choose(&ints)?.clone();
                let k: u8 = self.u.int_in_range(0..=3)?;
                format!("{i} < {k}")
            }
            _ => {
                let a = self.expr(self.cfg.max_expr_depth.saturating_sub(1))?;
                let b = self.literal()?;
                let op = *self.u.choose(&["<", "<=", ">", ">="])?;
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
            11 if !self.cfg.smooth => {
                let c = self.cond(1)?;
                let a = self.expr(d)?;
                let b = self.expr(d)?;
                format!("(if {c} {{ {a} }} else {{ {b} }})")
            }
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
                let k = self.u.int_in_range(0..=self.binary - 1)?;
                let a = self.expr(depth)?;
                let b = self.expr(depth)?;
                format!("b{k}({a}, {b})")
            }
            1 if self.unary > 0 => {
                let k = self.u.int_in_range(0..=self.unary - 1)?;
                let a = self.expr(depth)?;
                format!("u{k}({a})")
            }
            2 => {
                let a = self.expr(depth)?;
                let d: u8 = self.u.int_in_range(0..=4)?;
                format!("rec(tanh({a}), {d})")
            }
            _ => {
                let f = self.fn_value()?;
                let a = self.expr(depth)?;
                format!("apply({f}, {a})")
            }
        })
    }

    /// A variable, a literal, an array element or a converted integer.
    fn leaf(&mut self) -> Result<String> {
        let vars = self.f64_vars();
        let arrays = self.arrays();
        let ints = self.ints();
        let choice: u8 = self.u.int_in_range(0..=5)?;
        Ok(match choice {
            0..=2 if !vars.is_empty() => self.u.choose(&vars)?.clone(),
            3 if !arrays.is_empty() => {
                let (a, len) = self.u.choose(&arrays)?.clone();
                match self.u.int_in_range(0..=3u8)? {
                    // Bulk reductions, scaled down: arrays may hold large values.
                    0 => format!("0.1 * tanh(sum({a}))"),
                    1 => {
                        let same: Vec<&String> = arrays
                            .iter()
                            .filter(|(_, l)| *l == len)
                            .map(|(b, _)| b)
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
                format!("f64({i})")
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
