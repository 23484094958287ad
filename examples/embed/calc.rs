//! `calc`: a toy expression language compiled to irad IR through the builder
//! API (no IR text), the way a compiler embeds irad as its middle-end. The
//! example's `main.rs` parses a program, lowers it, asks irad for reverse-mode
//! gradients and calls the JIT-compiled code; `tests/embed_example.rs` runs
//! the same steps and checks the numbers.
//!
//! The language: a program is a list of definitions of f64 functions,
//!
//! ```text
//! def NAME(x, y, ...) = EXPR
//! EXPR := if ARITH (<|>) ARITH then EXPR else EXPR
//!       | sum NAME in INT..INT : EXPR      (the NAME is an f64 inside)
//!       | ARITH
//! ARITH := TERM ((+|-) TERM)*      TERM := UNARY ((*|/) UNARY)*
//! UNARY := - UNARY | ATOM (^ INT)?
//! ATOM := NUMBER | NAME | NAME(EXPR, ...) | (EXPR)
//! ```
//!
//! where a call names an earlier or later `def`, or one of `sin cos tan exp
//! log sqrt tanh atan`. `#` starts a comment. Lowering: each `def` becomes an
//! IR function with f64 parameters; `if` a branch and a phi; `sum` a loop with
//! an i64 counter and f64 accumulator phis; `^` `powi`; calls `invoke` or
//! primitive calls.
//!
//! Assumes nothing of its input. Guarantees: a malformed program is an
//! `Err` naming the line and column, never a panic; the IR it builds
//! verifies (checked before it is returned).

use irad::ir::{Block, FuncBuilder, FuncId, Module, Operand, Prim, Type};
use std::collections::HashMap;

/// A located error: `line:col: message`.
#[derive(Debug)]
pub struct CalcError(pub String);

impl std::fmt::Display for CalcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CalcError {}

/// The syntax tree of an expression.
#[derive(Clone, Debug)]
enum Expr {
    Num(f64),
    Var(String),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Pow(Box<Expr>, i64),
    Call(String, Vec<Expr>, (usize, usize)),
    If(Box<Expr>, char, Box<Expr>, Box<Expr>, Box<Expr>),
    Sum(String, i64, i64, Box<Expr>),
}

/// One `def`.
struct Def {
    name: String,
    params: Vec<String>,
    body: Expr,
}

/// Tokens: numbers, names, and single-character punctuation (`..` is two).
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Punct(char),
    Range,
    End,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Num(x) => write!(f, "`{x}`"),
            Tok::Name(n) => write!(f, "`{n}`"),
            Tok::Punct(c) => write!(f, "`{c}`"),
            Tok::Range => f.write_str("`..`"),
            Tok::End => f.write_str("the end of the program"),
        }
    }
}

/// Tokens with their (line, column).
type Tokens = Vec<(Tok, (usize, usize))>;

struct Parser {
    toks: Tokens,
    at: usize,
    depth: usize,
}

fn lex(src: &str) -> Result<Tokens, CalcError> {
    let mut out = Vec::new();
    for (ln, line) in src.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let pos = (ln + 1, i + 1);
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_digit() {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_digit()
                        || (chars[i] == '.' && chars.get(i + 1) != Some(&'.')))
                {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                let x = text
                    .parse()
                    .map_err(|_| CalcError(format!("{}:{}: bad number `{text}`", pos.0, pos.1)))?;
                out.push((Tok::Num(x), pos));
            } else if c.is_alphabetic() || c == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push((Tok::Name(chars[start..i].iter().collect()), pos));
            } else if c == '.' && chars.get(i + 1) == Some(&'.') {
                out.push((Tok::Range, pos));
                i += 2;
            } else if "+-*/^(),=<>:".contains(c) {
                out.push((Tok::Punct(c), pos));
                i += 1;
            } else {
                return Err(CalcError(format!(
                    "{}:{}: unexpected character `{c}`",
                    pos.0, pos.1
                )));
            }
        }
    }
    let end = (src.lines().count() + 1, 1);
    out.push((Tok::End, end));
    Ok(out)
}

/// Expressions nest at most this deep (so parsing cannot overflow the stack).
const MAX_DEPTH: usize = 200;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at.min(self.toks.len() - 1)].0
    }

    fn pos(&self) -> (usize, usize) {
        self.toks[self.at.min(self.toks.len() - 1)].1
    }

    fn err<T>(&self, msg: &str) -> Result<T, CalcError> {
        let (l, c) = self.pos();
        Err(CalcError(format!("{l}:{c}: {msg}")))
    }

    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        self.at += 1;
        t
    }

    fn expect(&mut self, p: char) -> Result<(), CalcError> {
        if *self.peek() == Tok::Punct(p) {
            self.at += 1;
            Ok(())
        } else {
            self.err(&format!("expected `{p}`, found {}", self.peek()))
        }
    }

    fn name(&mut self) -> Result<String, CalcError> {
        match self.next() {
            Tok::Name(n) => Ok(n),
            t => {
                self.at -= 1;
                self.err(&format!("expected a name, found {t}"))
            }
        }
    }

    fn int(&mut self) -> Result<i64, CalcError> {
        let neg = *self.peek() == Tok::Punct('-');
        if neg {
            self.at += 1;
        }
        match self.next() {
            Tok::Num(x) if x.fract() == 0.0 && x.abs() < 1e9 => {
                Ok(if neg { -(x as i64) } else { x as i64 })
            }
            t => {
                self.at -= 1;
                self.err(&format!("expected an integer, found {t}"))
            }
        }
    }

    fn program(&mut self) -> Result<Vec<Def>, CalcError> {
        let mut defs = Vec::new();
        while *self.peek() != Tok::End {
            if self.name()? != "def" {
                self.at -= 1;
                return self.err("expected `def`");
            }
            let name = self.name()?;
            self.expect('(')?;
            let mut params = Vec::new();
            while *self.peek() != Tok::Punct(')') {
                params.push(self.name()?);
                if *self.peek() == Tok::Punct(',') {
                    self.at += 1;
                }
            }
            self.expect(')')?;
            self.expect('=')?;
            let body = self.expr()?;
            defs.push(Def { name, params, body });
        }
        Ok(defs)
    }

    fn expr(&mut self) -> Result<Expr, CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("expression nested too deeply");
        }
        let e = match self.peek() {
            Tok::Name(n) if n == "if" => {
                self.at += 1;
                let a = self.arith()?;
                let op = match self.next() {
                    Tok::Punct(c @ ('<' | '>')) => c,
                    _ => {
                        self.at -= 1;
                        return self.err("expected `<` or `>`");
                    }
                };
                let b = self.arith()?;
                if self.name()? != "then" {
                    self.at -= 1;
                    return self.err("expected `then`");
                }
                let t = self.expr()?;
                if self.name()? != "else" {
                    self.at -= 1;
                    return self.err("expected `else`");
                }
                let f = self.expr()?;
                Expr::If(Box::new(a), op, Box::new(b), Box::new(t), Box::new(f))
            }
            Tok::Name(n) if n == "sum" => {
                self.at += 1;
                let var = self.name()?;
                if self.name()? != "in" {
                    self.at -= 1;
                    return self.err("expected `in`");
                }
                let lo = self.int()?;
                if self.next() != Tok::Range {
                    self.at -= 1;
                    return self.err("expected `..`");
                }
                let hi = self.int()?;
                self.expect(':')?;
                Expr::Sum(var, lo, hi, Box::new(self.expr()?))
            }
            _ => self.arith()?,
        };
        self.depth -= 1;
        Ok(e)
    }

    fn arith(&mut self) -> Result<Expr, CalcError> {
        let mut e = self.term()?;
        while let Tok::Punct(c @ ('+' | '-')) = *self.peek() {
            self.at += 1;
            e = Expr::Bin(c, Box::new(e), Box::new(self.term()?));
        }
        Ok(e)
    }

    fn term(&mut self) -> Result<Expr, CalcError> {
        let mut e = self.unary()?;
        while let Tok::Punct(c @ ('*' | '/')) = *self.peek() {
            self.at += 1;
            e = Expr::Bin(c, Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, CalcError> {
        if *self.peek() == Tok::Punct('-') {
            self.at += 1;
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return self.err("expression nested too deeply");
            }
            let e = Expr::Neg(Box::new(self.unary()?));
            self.depth -= 1;
            return Ok(e);
        }
        let a = self.atom()?;
        if *self.peek() == Tok::Punct('^') {
            self.at += 1;
            return Ok(Expr::Pow(Box::new(a), self.int()?));
        }
        Ok(a)
    }

    fn atom(&mut self) -> Result<Expr, CalcError> {
        let pos = self.pos();
        match self.next() {
            Tok::Num(x) => Ok(Expr::Num(x)),
            Tok::Name(n) => {
                if *self.peek() != Tok::Punct('(') {
                    return Ok(Expr::Var(n));
                }
                self.at += 1;
                let mut args = Vec::new();
                while *self.peek() != Tok::Punct(')') {
                    args.push(self.expr()?);
                    if *self.peek() == Tok::Punct(',') {
                        self.at += 1;
                    } else if *self.peek() != Tok::Punct(')') {
                        return self.err("expected `,` or `)`");
                    }
                }
                self.at += 1;
                Ok(Expr::Call(n, args, pos))
            }
            Tok::Punct('(') => {
                let e = self.expr()?;
                self.expect(')')?;
                Ok(e)
            }
            t => {
                self.at -= 1;
                self.err(&format!("expected an expression, found {t}"))
            }
        }
    }
}

/// The primitives `calc` programs may call, by name.
const BUILTINS: &[(&str, Prim)] = &[
    ("sin", Prim::Sin),
    ("cos", Prim::Cos),
    ("tan", Prim::Tan),
    ("exp", Prim::Exp),
    ("log", Prim::Log),
    ("sqrt", Prim::Sqrt),
    ("tanh", Prim::Tanh),
    ("atan", Prim::Atan),
];

/// The state of lowering one function.
struct Lower<'m> {
    b: FuncBuilder<'m>,
    funcs: &'m HashMap<String, (FuncId, usize)>,
    /// Variables in scope (innermost last).
    scope: Vec<(String, Operand)>,
}

impl Lower<'_> {
    fn value(&mut self, prim: Prim, args: &[Operand]) -> Result<Operand, CalcError> {
        let v = self
            .b
            .prim(prim, args)
            .map_err(|e| CalcError(e.to_string()))?;
        v.map(Operand::Value)
            .ok_or_else(|| CalcError(format!("`{prim}` gave no value")))
    }

    fn block(&mut self) -> Block {
        self.b.create_block()
    }

    fn at(&mut self, block: Block) -> Result<(), CalcError> {
        self.b
            .switch_to_block(block)
            .map_err(|e| CalcError(e.to_string()))
    }

    fn here(&self) -> Result<Block, CalcError> {
        self.b
            .current_block()
            .ok_or_else(|| CalcError("no current block".into()))
    }

    fn expr(&mut self, e: &Expr) -> Result<Operand, CalcError> {
        let be = |e: irad::ir::BuildError| CalcError(e.to_string());
        Ok(match e {
            Expr::Num(x) => Operand::from(*x),
            Expr::Var(n) => match self.scope.iter().rev().find(|(m, _)| m == n) {
                Some((_, op)) => *op,
                None => return Err(CalcError(format!("unknown variable `{n}`"))),
            },
            Expr::Neg(a) => {
                let a = self.expr(a)?;
                self.value(Prim::Neg, &[a])?
            }
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                let prim = match op {
                    '+' => Prim::Add,
                    '-' => Prim::Sub,
                    '*' => Prim::Mul,
                    _ => Prim::Div,
                };
                self.value(prim, &[a, b])?
            }
            Expr::Pow(a, k) => {
                let a = self.expr(a)?;
                self.value(Prim::Powi, &[a, Operand::from(*k)])?
            }
            Expr::Call(name, args, (l, c)) => {
                let ops = args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(&(f, arity)) = self.funcs.get(name) {
                    if arity != ops.len() {
                        return Err(CalcError(format!(
                            "{l}:{c}: `{name}` takes {arity} argument(s), not {}",
                            ops.len()
                        )));
                    }
                    let r = self.b.invoke(f, &ops).map_err(be)?;
                    Operand::Value(r.ok_or_else(|| CalcError("a call without result".into()))?)
                } else if let Some(&(_, prim)) = BUILTINS.iter().find(|(n, _)| n == name) {
                    if ops.len() != 1 {
                        return Err(CalcError(format!("{l}:{c}: `{name}` takes one argument")));
                    }
                    self.value(prim, &ops)?
                } else {
                    return Err(CalcError(format!("{l}:{c}: unknown function `{name}`")));
                }
            }
            Expr::If(a, op, b, t, f) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                let cmp = if *op == '<' { Prim::Lt } else { Prim::Gt };
                let cond = self.value(cmp, &[a, b])?;
                // `gotoifnot` falls through to the next block of the layout,
                // and blocks join the layout when they are created: branch
                // from a new block made right before the then-block.
                let branch = self.block();
                self.b.goto(branch).map_err(be)?;
                self.at(branch)?;
                let (then_b, else_b, join) = (self.block(), self.block(), self.block());
                self.b.gotoifnot(cond, else_b).map_err(be)?;
                self.at(then_b)?;
                let tv = self.expr(t)?;
                let then_end = self.here()?;
                self.b.goto(join).map_err(be)?;
                self.at(else_b)?;
                let fv = self.expr(f)?;
                let else_end = self.here()?;
                self.b.goto(join).map_err(be)?;
                self.at(join)?;
                let phi = self
                    .b
                    .phi(Type::F64, &[(then_end, tv), (else_end, fv)])
                    .map_err(be)?;
                Operand::Value(phi)
            }
            Expr::Sum(var, lo, hi, body) => {
                let entry = self.here()?;
                let (head, step, exit) = (self.block(), self.block(), self.block());
                self.b.goto(head).map_err(be)?;
                self.at(head)?;
                let k = self
                    .b
                    .phi(Type::I64, &[(entry, Operand::from(*lo))])
                    .map_err(be)?;
                let acc = self
                    .b
                    .phi(Type::F64, &[(entry, Operand::from(0.0))])
                    .map_err(be)?;
                let more = self.value(Prim::Lt, &[k.into(), Operand::from(*hi)])?;
                self.b.gotoifnot(more, exit).map_err(be)?;
                self.at(step)?;
                let kf = self.value(Prim::Sitofp, &[k.into()])?;
                self.scope.push((var.clone(), kf));
                let term = self.expr(body)?;
                self.scope.pop();
                let acc1 = self.value(Prim::Add, &[acc.into(), term])?;
                let k1 = self.value(Prim::Iadd, &[k.into(), Operand::from(1i64)])?;
                let latch = self.here()?;
                self.b.goto(head).map_err(be)?;
                self.b.add_phi_entry(k, latch, k1).map_err(be)?;
                self.b.add_phi_entry(acc, latch, acc1).map_err(be)?;
                // The loop exits from its header, where `acc` is the sum.
                self.at(exit)?;
                Operand::Value(acc)
            }
        })
    }
}

/// Parses `src` and lowers every `def` to an IR function of the same name.
pub fn compile(src: &str) -> Result<Module, CalcError> {
    let mut p = Parser {
        toks: lex(src)?,
        at: 0,
        depth: 0,
    };
    let defs = p.program()?;
    let mut m = Module::new();
    let mut funcs = HashMap::new();
    for d in &defs {
        let params = d
            .params
            .iter()
            .map(|n| (Some(n.clone()), Type::F64))
            .collect();
        let f = m
            .declare_func(&d.name, params, Type::F64)
            .map_err(|e| CalcError(format!("def {}: {e}", d.name)))?;
        funcs.insert(d.name.clone(), (f, d.params.len()));
    }
    for d in &defs {
        let (f, _) = funcs[&d.name];
        let b = FuncBuilder::new(&mut m, f).map_err(|e| CalcError(e.to_string()))?;
        let mut lw = Lower {
            b,
            funcs: &funcs,
            scope: Vec::new(),
        };
        for (i, n) in d.params.iter().enumerate() {
            let v = lw.b.param(i).map_err(|e| CalcError(e.to_string()))?;
            lw.scope.push((n.clone(), Operand::Value(v)));
        }
        let entry = lw.block();
        lw.at(entry)?;
        let r = lw
            .expr(&d.body)
            .map_err(|e| CalcError(format!("def {}: {e}", d.name)))?;
        lw.b.ret(r).map_err(|e| CalcError(e.to_string()))?;
    }
    irad::ir::verify::verify_module(&m).map_err(|errs| {
        CalcError(format!(
            "internal error: the lowered IR does not verify:\n{}",
            irad::ir::verify::render_errors(&m, &errs)
        ))
    })?;
    Ok(m)
}
