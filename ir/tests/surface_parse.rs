//! The surface-language parser: every corpus `.irad` file parses; precedence,
//! associativity, flat chains, statements and block tails give the expected
//! tree (printed compactly as s-expressions); every kind of error has its exact
//! message and position; huge and deeply nested inputs are fast and never
//! crash; random input never panics.

use irad_ir::surface::ast::{BinOp, Block, ExprId, ExprKind, File, FnDecl, Stmt, StmtKind, UnOp};
use irad_ir::surface::parse;
use proptest::prelude::*;
use std::path::PathBuf;

// ---- printing the tree ----

/// `(a + b - c)` for a chain, `(-a)` for a negation, `(call f x)`,
/// `(index a i)`, `(field t 0)`, `(tuple a b)`, `(if c {..} {..})`, `{s; tail}`.
fn ex(f: &File, id: ExprId) -> String {
    let e = f.expr(id);
    match &e.kind {
        ExprKind::F64(x) => format!("{x:?}"),
        ExprKind::I64(i) => format!("{i}"),
        ExprKind::Bool(b) => format!("{b}"),
        ExprKind::Unit => "()".into(),
        ExprKind::Name(n) => f.name(*n).to_string(),
        ExprKind::Unary { op, operand } => {
            let o = match op {
                UnOp::Neg => "-",
                UnOp::Not => "!",
            };
            format!("({o}{})", ex(f, *operand))
        }
        ExprKind::Chain { first, rest } => {
            let mut s = format!("({}", ex(f, *first));
            for &(op, _, e) in f.links(*rest) {
                s += &format!(" {} {}", op.symbol(), ex(f, e));
            }
            s + ")"
        }
        ExprKind::Call { callee, args } => {
            let mut s = format!("(call {}", ex(f, *callee));
            for &a in f.exprs(*args) {
                s += &format!(" {}", ex(f, a));
            }
            s + ")"
        }
        ExprKind::Index { array, index } => {
            format!("(index {} {})", ex(f, *array), ex(f, *index))
        }
        ExprKind::Field { tuple, index } => format!("(field {} {index})", ex(f, *tuple)),
        ExprKind::Tuple(es) => {
            let parts: Vec<String> = f.exprs(*es).iter().map(|&e| ex(f, e)).collect();
            format!("(tuple {})", parts.join(" "))
        }
        ExprKind::If { cond, then, els } => match els {
            Some(e) => format!(
                "(if {} {} {})",
                ex(f, *cond),
                blk(f, f.block(*then)),
                ex(f, *e)
            ),
            None => format!("(if {} {})", ex(f, *cond), blk(f, f.block(*then))),
        },
        ExprKind::Block(b) => blk(f, f.block(*b)),
    }
}

fn blk(f: &File, b: &Block) -> String {
    let mut parts: Vec<String> = f.stmts(b.stmts).iter().map(|s| st(f, s) + ";").collect();
    if let Some(t) = b.tail {
        parts.push(ex(f, t));
    }
    format!("{{{}}}", parts.join(" "))
}

fn st(f: &File, s: &Stmt) -> String {
    match &s.kind {
        StmtKind::Let {
            mutable,
            name,
            ty,
            init,
        } => {
            let m = if *mutable { "mut " } else { "" };
            let t = ty.as_ref().map_or(String::new(), |t| format!(": {t}"));
            format!("(let {m}{}{t} {})", f.name(name.name), ex(f, *init))
        }
        StmtKind::Assign { name, value } => {
            format!("(set {} {})", f.name(name.name), ex(f, *value))
        }
        StmtKind::IndexAssign {
            array,
            index,
            value,
        } => format!(
            "(setindex {} {} {})",
            ex(f, *array),
            ex(f, *index),
            ex(f, *value)
        ),
        StmtKind::Expr(e) => ex(f, *e),
        StmtKind::While { cond, body } => format!("(while {} {})", ex(f, *cond), blk(f, body)),
        StmtKind::For {
            var,
            start,
            end,
            body,
        } => format!(
            "(for {} {} {} {})",
            f.name(var.name),
            ex(f, *start),
            ex(f, *end),
            blk(f, body)
        ),
        StmtKind::Return(Some(e)) => format!("(return {})", ex(f, *e)),
        StmtKind::Return(None) => "(return)".into(),
        StmtKind::Break => "(break)".into(),
        StmtKind::Continue => "(continue)".into(),
    }
}

fn func(f: &File, d: &FnDecl) -> String {
    let ps: Vec<String> = f
        .params(d.params)
        .iter()
        .map(|p| format!("{}: {}", f.name(p.name.name), p.ty))
        .collect();
    format!(
        "(fn {} ({}) -> {} {})",
        f.name(d.name.name),
        ps.join(", "),
        d.ret,
        blk(f, &d.body)
    )
}

fn file(f: &File) -> String {
    let fs: Vec<String> = f.funcs.iter().map(|d| func(f, d)).collect();
    fs.join("\n")
}

// ---- checks ----

/// Every id of the tree, in the order of a walk, checking that each node
/// reached is the one its id indexes and that children come before their
/// parent (`below` is the parent's id, or `u32::MAX` at the top).
fn ids(f: &File) -> Vec<u32> {
    fn e(f: &File, id: ExprId, below: u32, out: &mut Vec<u32>) {
        let x = f.expr(id);
        assert_eq!(x.id, id, "node {id:?} is not at its index");
        assert!(id.0 < below, "node {id:?} made after its parent {below}");
        out.push(x.id.0);
        let me = id.0;
        match &x.kind {
            ExprKind::Unary { operand, .. } => e(f, *operand, me, out),
            ExprKind::Chain { first, rest } => {
                e(f, *first, me, out);
                f.links(*rest)
                    .iter()
                    .for_each(|&(_, _, x)| e(f, x, me, out));
            }
            ExprKind::Call { callee, args } => {
                e(f, *callee, me, out);
                f.exprs(*args).iter().for_each(|&x| e(f, x, me, out));
            }
            ExprKind::Index { array, index } => {
                e(f, *array, me, out);
                e(f, *index, me, out);
            }
            ExprKind::Field { tuple, .. } => e(f, *tuple, me, out),
            ExprKind::Tuple(es) => f.exprs(*es).iter().for_each(|&x| e(f, x, me, out)),
            ExprKind::If { cond, then, els } => {
                e(f, *cond, me, out);
                b(f, f.block(*then), me, out);
                if let Some(x) = els {
                    e(f, *x, me, out);
                }
            }
            ExprKind::Block(bl) => b(f, f.block(*bl), me, out),
            _ => {}
        }
    }
    fn b(f: &File, bl: &Block, below: u32, out: &mut Vec<u32>) {
        for s in f.stmts(bl.stmts) {
            match &s.kind {
                StmtKind::Let { init, .. } => e(f, *init, below, out),
                StmtKind::Assign { value, .. } => e(f, *value, below, out),
                StmtKind::IndexAssign {
                    array,
                    index,
                    value,
                } => {
                    e(f, *array, below, out);
                    e(f, *index, below, out);
                    e(f, *value, below, out);
                }
                StmtKind::Expr(x) => e(f, *x, below, out),
                StmtKind::While { cond, body } => {
                    e(f, *cond, below, out);
                    b(f, body, below, out);
                }
                StmtKind::For {
                    start, end, body, ..
                } => {
                    e(f, *start, below, out);
                    e(f, *end, below, out);
                    b(f, body, below, out);
                }
                StmtKind::Return(Some(x)) => e(f, *x, below, out),
                _ => {}
            }
        }
        if let Some(t) = bl.tail {
            e(f, t, below, out);
        }
    }
    let mut out = Vec::new();
    for d in &f.funcs {
        b(f, &d.body, u32::MAX, &mut out);
    }
    out
}

/// Parses `src`, checks ids are dense and in creation order (a node after
/// its children), prints the tree.
fn parsed(src: &str) -> String {
    match parse(src) {
        Ok(f) => {
            let mut got = ids(&f);
            got.sort_unstable();
            let want: Vec<u32> = (0..f.n_exprs()).collect();
            assert_eq!(got, want, "ids not dense for {src}");
            file(&f)
        }
        Err(e) => format!("error: {e}"),
    }
}

/// The body of `fn f() { BODY }`, printed.
fn body(src: &str) -> String {
    match parse(&format!("fn f() {{ {src} }}")) {
        Ok(f) => f
            .funcs
            .first()
            .map_or("no function".into(), |d| blk(&f, &d.body)),
        Err(e) => format!("error: {e}"),
    }
}

/// The expression `src` (as a function body's tail), printed.
fn expr(src: &str) -> String {
    let b = body(src);
    b.strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .map_or(b.clone(), str::to_string)
}

/// Parses `src`, expecting an error: "line:col: message (in @f)".
fn err(src: &str) -> String {
    match parse(src) {
        Ok(_) => "parsed without error".to_string(),
        Err(e) => {
            let pos = e.loc.pos.map_or("?".to_string(), |p| p.to_string());
            format!("{pos}: {e}")
        }
    }
}

fn corpus() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/surface");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "irad"));
    files.sort();
    files
}

// ---- tests ----

#[test]
fn corpus_parses() {
    let files = corpus();
    assert!(files.len() >= 11, "corpus missing: {files:?}");
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        let out = parsed(&src);
        assert!(!out.starts_with("error"), "{}: {out}", path.display());
    }
}

#[test]
fn corpus_shape() {
    let src = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/surface/branchy.irad"),
    )
    .unwrap_or_default();
    assert_eq!(
        parsed(&src),
        "(fn branchy (x: [f64], w: f64) -> f64 {(let mut s 0.0); \
         (for i 0 (call len x) {(let v (index x i)); \
         (if (v > 0.0) {(set s (s + ((call sin v) * v * w)));} \
         (if (v > (-1.0)) {(set s (s + (call exp v) - (0.5 * v * v)));} \
         {(set s (s - (w * w * (call log (-v)))));}))}); s})"
    );
}

#[test]
fn precedence_and_associativity() {
    assert_eq!(expr("a - b - c"), "(a - b - c)");
    assert_eq!(expr("a + b * c"), "(a + (b * c))");
    assert_eq!(expr("a * b + c"), "((a * b) + c)");
    assert_eq!(expr("-a * b"), "((-a) * b)");
    assert_eq!(expr("!a && b || c"), "(((!a) && b) || c)");
    assert_eq!(expr("a || b && c"), "(a || (b && c))");
    assert_eq!(expr("a + b < c * d"), "((a + b) < (c * d))");
    assert_eq!(expr("a == b && c != d"), "((a == b) && (c != d))");
    assert_eq!(expr("a % b / c * d"), "(a % b / c * d)");
    assert_eq!(expr("(a + b) * c"), "((a + b) * c)");
    assert_eq!(expr("x[i].0"), "(field (index x i) 0)");
    assert_eq!(expr("f(x)(y)"), "(call (call f x) y)");
    assert_eq!(expr("-f(x)[0]"), "(-(index (call f x) 0))");
    assert_eq!(expr("--x"), "(-(-x))");
    assert_eq!(expr("!!b"), "(!(!b))");
    assert_eq!(expr("a * b + c * d - e"), "((a * b) + (c * d) - e)");
    assert_eq!(expr("a || b || c && d && e"), "(a || b || (c && d && e))");
    assert_eq!(expr("a <= b + c * d - e"), "(a <= (b + (c * d) - e))");
}

#[test]
fn chains_are_flat() {
    let f = parse("fn f() -> f64 { a + b - c + d }").unwrap_or_else(|e| panic!("{e}"));
    let tail = f.funcs[0].body.tail.map(|t| f.expr(t));
    match tail.map(|t| &t.kind) {
        Some(ExprKind::Chain { first, rest }) => {
            assert!(matches!(f.expr(*first).kind, ExprKind::Name(_)));
            let ops: Vec<BinOp> = f.links(*rest).iter().map(|r| r.0).collect();
            assert_eq!(ops, [BinOp::Add, BinOp::Sub, BinOp::Add]);
            let cols: Vec<u32> = f.links(*rest).iter().map(|r| r.1.col).collect();
            assert_eq!(cols, [19, 23, 27]);
            assert_eq!(tail.map(|t| t.pos.col), Some(17));
        }
        other => panic!("not a chain: {other:?}"),
    }
    // A single operand is not wrapped.
    assert_eq!(expr("a"), "a");
    assert_eq!(expr("(a)"), "a");
}

#[test]
fn literals() {
    assert_eq!(expr("1.0"), "1.0");
    assert_eq!(expr("2e-3"), "0.002");
    assert_eq!(expr("1e5"), "100000.0");
    assert_eq!(expr("1.5E+2"), "150.0");
    assert_eq!(expr("inf"), "inf");
    assert_eq!(expr("nan"), "NaN");
    assert_eq!(expr("3"), "3");
    assert_eq!(expr("true"), "true");
    assert_eq!(expr("false"), "false");
    assert_eq!(expr("()"), "()");
    assert_eq!(expr("-1.0"), "(-1.0)");
    assert_eq!(expr("-7"), "(-7)");
    assert_eq!(expr("9223372036854775807"), "9223372036854775807");
    assert_eq!(expr("-9223372036854775808"), "-9223372036854775808");
    assert_eq!(expr("--9223372036854775808"), "(--9223372036854775808)");
    assert_eq!(
        expr("-9223372036854775808 + 1"),
        "(-9223372036854775808 + 1)"
    );
    assert_eq!(expr("(a, b)"), "(tuple a b)");
    assert_eq!(expr("(a,)"), "(tuple a)");
    assert_eq!(expr("(a, b,)"), "(tuple a b)");
    assert_eq!(expr("f(a, b,)"), "(call f a b)");
    assert_eq!(expr("f()"), "(call f)");
}

#[test]
fn fields_and_ranges() {
    assert_eq!(expr("t.0.1"), "(field (field t 0) 1)");
    assert_eq!(expr("t.0 .1"), "(field (field t 0) 1)");
    assert_eq!(expr("t.12"), "(field t 12)");
    assert_eq!(expr("t.0[i]"), "(index (field t 0) i)");
    assert_eq!(body("for i in 0..n { }"), "{(for i 0 n {});}");
    assert_eq!(
        body("for i in 0..len(x) - 1 { s = s + 1.0; }"),
        "{(for i 0 ((call len x) - 1) {(set s (s + 1.0));});}"
    );
    assert_eq!(
        body("for i in a.0..a.1 {}"),
        "{(for i (field a 0) (field a 1) {});}"
    );
}

#[test]
fn statements() {
    assert_eq!(
        body("let x = 1; let mut y: f64 = 2.0; y = x; a[i] = y; t.0[j] = 3; f(x); return y;"),
        "{(let x 1); (let mut y: f64 2.0); (set y x); (setindex a i y); \
         (setindex (field t 0) j 3); (call f x); (return y);}"
    );
    assert_eq!(
        body("while c { break; continue; return; }"),
        "{(while c {(break); (continue); (return);});}"
    );
    assert_eq!(body("return x"), "{(return x);}");
    assert_eq!(
        body("let t: (f64, [i64]) = u;"),
        "{(let t: (f64, [i64]) u);}"
    );
    assert_eq!(body(";; x"), "{x}");
    assert_eq!(body(""), "{}");
}

#[test]
fn block_tails_and_statements() {
    assert_eq!(body("if c { 1 } else { 2 }"), "{(if c {1} {2})}");
    assert_eq!(body("if c { 1 } else { 2 } x"), "{(if c {1} {2}); x}");
    assert_eq!(body("if c { f(); } x"), "{(if c {(call f);}); x}");
    assert_eq!(body("if c { f(); }; x"), "{(if c {(call f);}); x}");
    assert_eq!(body("{ 1 }"), "{{1}}");
    assert_eq!(body("{ 1 } { 2 }"), "{{1}; {2}}");
    assert_eq!(
        body("let w = if c { a } else { -a };"),
        "{(let w (if c {a} {(-a)}));}"
    );
    assert_eq!(
        body("let y = if c { 1 } else { 2 } + 3;"),
        "{(let y ((if c {1} {2}) + 3));}"
    );
    assert_eq!(
        body("let b = { let z = 1; z };"),
        "{(let b {(let z 1); z});}"
    );
    assert_eq!(body("while c { } x"), "{(while c {}); x}");
}

#[test]
fn else_if_chains() {
    assert_eq!(
        expr("if a { 1 } else if b { 2 } else if c { 3 } else { 4 }"),
        "(if a {1} (if b {2} (if c {3} {4})))"
    );
    assert_eq!(body("if a { } else if b { }"), "{(if a {} (if b {}))}");
    // `{` ends a condition.
    assert_eq!(expr("if x { y } else { z }"), "(if x {y} {z})");
    assert_eq!(
        expr("if f(x) < 1 { y } else { z }"),
        "(if ((call f x) < 1) {y} {z})"
    );
    assert_eq!(
        body("while x[i] > 0.0 { i = i + 1; }"),
        "{(while ((index x i) > 0.0) {(set i (i + 1));});}"
    );
}

#[test]
fn items_and_types() {
    assert_eq!(
        parsed("fn f() {}\nfn g(a: i64, b: bool,) -> i64 { a }"),
        "(fn f () -> () {})\n(fn g (a: i64, b: bool) -> i64 {a})"
    );
    assert_eq!(
        parsed("fn h(f: fn(f64, f64) -> f64, g: fn(), t: (f64, (i64,)), u: (f64)) -> [bool] { x }"),
        "(fn h (f: fn(f64, f64) -> f64, g: fn() -> (), t: (f64, (i64,)), u: f64) -> [bool] {x})"
    );
    assert_eq!(parsed("fn f() -> () { }"), "(fn f () -> () {})");
    assert_eq!(
        parsed("// only a comment\r\n\tfn f() {}\r\n"),
        "(fn f () -> () {})"
    );
    assert_eq!(parsed(""), "");
}

#[test]
fn positions() {
    let f = parse("fn f(x: f64) -> f64 {\n  let y = x;\n  y\n}").unwrap_or_else(|e| panic!("{e}"));
    let d = &f.funcs[0];
    assert_eq!((d.pos.line, d.pos.col), (1, 1));
    assert_eq!((d.name.pos.line, d.name.pos.col), (1, 4));
    let param = &f.params(d.params)[0];
    assert_eq!((param.name.pos.line, param.name.pos.col), (1, 6));
    assert_eq!((d.body.pos.line, d.body.pos.col), (1, 21));
    let stmt = &f.stmts(d.body.stmts)[0];
    assert_eq!((stmt.pos.line, stmt.pos.col), (2, 3));
    let tail = d.body.tail.map(|t| f.expr(t).pos);
    assert_eq!(tail.map(|p| (p.line, p.col)), Some((3, 3)));
    assert_eq!(f.n_exprs(), 2);
}

#[test]
fn errors() {
    assert_eq!(
        err("fn f() {\n  let x = $;\n}"),
        "2:11: unexpected character `$` (in @f)"
    );
    assert_eq!(
        err("fn f() { a & b }"),
        "1:12: unexpected character `&` (in @f)"
    );
    assert_eq!(
        err("fn f() { é }"),
        "1:10: unexpected character `é` (in @f)"
    );
    // The first error of the text wins over a later bad character.
    assert_eq!(
        err("fn f() { let = 1; $ }"),
        "1:14: expected a name, found `=` (in @f)"
    );
    assert_eq!(
        err("fn f() { f(1 }"),
        "1:14: expected `,` or `)`, found `}` (in @f)"
    );
    assert_eq!(
        err("fn f() { (1 }"),
        "1:13: expected `,` or `)`, found `}` (in @f)"
    );
    assert_eq!(
        err("fn f() { let x = 1 }"),
        "1:20: expected `;`, found `}` (in @f)"
    );
    assert_eq!(
        err("fn f() { x y }"),
        "1:12: expected `;`, found `y` (in @f)"
    );
    assert_eq!(
        err("fn f() { let x = ; }"),
        "1:18: expected an expression, found `;` (in @f)"
    );
    assert_eq!(
        err("fn f() { 1 + }"),
        "1:14: expected an expression, found `}` (in @f)"
    );
    assert_eq!(
        err("fn f() { let x = 1;"),
        "1:20: expected an expression, found end of file (in @f)"
    );
    assert_eq!(
        err("fn f() { if c }"),
        "1:15: expected `{`, found `}` (in @f)"
    );
    assert_eq!(
        err("fn f() { while c; }"),
        "1:17: expected `{`, found `;` (in @f)"
    );
    assert_eq!(
        err("fn f() { for i 0..n {} }"),
        "1:16: expected `in`, found `0` (in @f)"
    );
    assert_eq!(
        err("fn f() { for i in 0 {} }"),
        "1:21: expected `..`, found `{` (in @f)"
    );
    assert_eq!(err("fn f(x) {}"), "1:7: expected `:`, found `)` (in @f)");
    assert_eq!(
        err("fn f(x: g) {}"),
        "1:9: expected a type, found `g` (in @f)"
    );
    assert_eq!(
        err("fn f() -> {}"),
        "1:11: expected a type, found `{` (in @f)"
    );
    assert_eq!(err("fn (x: f64) {}"), "1:4: expected a name, found `(`");
    assert_eq!(err("fn if() {}"), "1:4: expected a name, found `if`");
    assert_eq!(err("let x = 1;"), "1:1: expected `fn`, found `let`");
    assert_eq!(err("fn f() {} }"), "1:11: expected `fn`, found `}`");
    assert_eq!(
        err("fn f() { return 1 2; }"),
        "1:19: expected `;`, found `2` (in @f)"
    );
    assert_eq!(
        err("fn f() { t.x }"),
        "1:12: expected a field number, found `x` (in @f)"
    );
    assert_eq!(
        err("fn f() { 1 = 2; }"),
        "1:10: invalid left-hand side of assignment (in @f)"
    );
    assert_eq!(
        err("fn f() { else }"),
        "1:10: expected an expression, found `else` (in @f)"
    );
}

#[test]
fn positions_with_crlf_tabs_and_unicode() {
    assert_eq!(
        err("// é\r\nfn f() {\r\n\tlet x = 1;\r\n\tx +\r\n}\r\n"),
        "5:1: expected an expression, found `}` (in @f)"
    );
    assert_eq!(
        err("fn f() {\r\n\t$"),
        "2:2: unexpected character `$` (in @f)"
    );
    assert_eq!(
        err("fn f() { \"é\" }"),
        "1:10: unexpected character `\"` (in @f)"
    );
    assert_eq!(err("@"), "1:1: unexpected character `@`");
    assert_eq!(
        err("fn f() { x\u{0} }"),
        "1:11: unexpected character '\\0' (in @f)"
    );
}

#[test]
fn comparison_chains() {
    assert_eq!(
        err("fn f() { a < b == c }"),
        "1:16: comparison operators cannot be chained (in @f)"
    );
    assert_eq!(
        err("fn f() { a < b + c < d }"),
        "1:20: comparison operators cannot be chained (in @f)"
    );
    assert_eq!(expr("(a < b) == c"), "((a < b) == c)");
    assert_eq!(expr("a < b && b < c"), "((a < b) && (b < c))");
}

#[test]
fn number_errors() {
    assert_eq!(
        err("fn f() {\n  99999999999999999999\n}"),
        "2:3: integer literal 99999999999999999999 out of range for i64 (in @f)"
    );
    assert_eq!(
        err("fn f() { 9223372036854775808 }"),
        "1:10: integer literal 9223372036854775808 out of range for i64 (in @f)"
    );
    assert_eq!(
        err("fn f() { -9223372036854775808[0] }"),
        "1:11: integer literal 9223372036854775808 out of range for i64 (in @f)"
    );
    assert_eq!(
        err("fn f() { 1.5e+ }"),
        "1:10: invalid number `1.5e+` (in @f)"
    );
    assert_eq!(err("fn f() { 1x }"), "1:10: invalid number `1x` (in @f)");
    assert_eq!(err("fn f() { 2. }"), "1:10: invalid number `2.` (in @f)");
    assert_eq!(err("fn f() { 1e }"), "1:10: invalid number `1e` (in @f)");
    assert_eq!(
        err("fn f() { t.99999999999 }"),
        "1:12: field number 99999999999 out of range (in @f)"
    );
}

#[test]
fn type_errors() {
    assert_eq!(
        err("fn f(a: [(f64, f64)]) {}"),
        "1:10: array elements must be f64, i64 or bool, found (f64, f64) (in @f)"
    );
    assert_eq!(
        err("fn f(a: [[f64]]) {}"),
        "1:10: array elements must be f64, i64 or bool, found [f64] (in @f)"
    );
    assert_eq!(
        err("fn f(a: [f64) {}"),
        "1:13: expected `]`, found `)` (in @f)"
    );
    let deep = format!(
        "fn f(a: {}f64{}) {{}}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    assert_eq!(
        err(&deep),
        "1:265: type nested deeper than 256 levels (in @f)"
    );
    let deep = format!("fn f(a: {}f64) {{}}", "fn() -> ".repeat(100_000));
    assert!(err(&deep).ends_with("type nested deeper than 256 levels (in @f)"));
}

#[test]
fn huge_inputs_are_fast() {
    let start = std::time::Instant::now();
    let sum = format!(
        "fn f(x: f64) -> f64 {{ {} }}",
        vec!["x"; 100_000].join(" + ")
    );
    let f = parse(&sum).unwrap_or_else(|e| panic!("{e}"));
    match f.funcs[0].body.tail.map(|t| &f.expr(t).kind) {
        Some(ExprKind::Chain { rest, .. }) => assert_eq!(rest.len(), 99_999),
        other => panic!("not a chain: {other:?}"),
    }
    assert_eq!(f.n_exprs(), 100_001);
    let mixed = format!("fn f(x: f64) -> f64 {{ {}x }}", "x * x + ".repeat(100_000));
    assert!(parse(&mixed).is_ok());
    let stmts = format!("fn f() {{ {} }}", "let x = 1; x = x + 1; ".repeat(50_000));
    let f = parse(&stmts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.stmts(f.funcs[0].body.stmts).len(), 100_000);
    let funcs = "fn f() {}\n".repeat(100_000);
    assert!(parse(&funcs).is_ok());
    assert!(
        start.elapsed().as_secs() < 10,
        "too slow: {:?}",
        start.elapsed()
    );
}

#[test]
fn deep_nesting_is_an_error() {
    let msg = "expression nested deeper than 256 levels (in @f)";
    let n = 100_000;
    for (open, close) in [
        ("(", ")"),
        ("{", "}"),
        ("-", ""),
        ("!", ""),
        ("f(", ")"),
        ("a[", "]"),
        ("if c { ", " }"),
        ("if c {} else ", ""),
        ("(1, ", ")"),
        ("{ let x = ", "; x }"),
        ("{ while c { ", " } }"),
    ] {
        let src = format!("fn f() {{ {}x{} }}", open.repeat(n), close.repeat(n));
        let e = err(&src);
        assert!(e.ends_with(msg), "{open}: {e}");
    }
    let calls = format!("fn f() {{ f{} }}", "(x)".repeat(n));
    assert!(err(&calls).ends_with(msg));
    let fields = format!("fn f() {{ t{} }}", ".0".repeat(n));
    assert!(err(&fields).ends_with(msg));
    let mixed = format!("fn f() {{ {}x }}", "-(!{a[".repeat(n));
    assert!(err(&mixed).ends_with(msg));
    assert_eq!(
        err(&format!("fn f() {{ {}x }}", "(".repeat(n))),
        "1:264: expression nested deeper than 256 levels (in @f)"
    );
}

#[test]
fn nesting_within_the_limit_parses() {
    // Mixed nesting up to the limit parses on a test thread's stack.
    for (open, close, n) in [
        ("(", ")", 250),
        ("{", "}", 120),
        ("-", "", 250),
        ("f(", ")", 250),
        ("if c { ", " }", 120),
        ("{ while c { ", " } }", 60),
        ("-(!{a[", "]})", 30),
    ] {
        let src = format!("fn f() {{ {}x{} }}", open.repeat(n), close.repeat(n));
        assert!(parse(&src).is_ok(), "{open} x {n}: {}", err(&src));
    }
}

const SOUP: &[&str] = &[
    "fn",
    "let",
    "mut",
    "if",
    "else",
    "while",
    "for",
    "in",
    "return",
    "break",
    "continue",
    "true",
    "false",
    "inf",
    "nan",
    "x",
    "f",
    "f64",
    "i64",
    "bool",
    "0",
    "1",
    "1.5",
    "2e3",
    "9223372036854775808",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    ";",
    ".",
    "..",
    "->",
    "+",
    "-",
    "*",
    "/",
    "%",
    "!",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "&&",
    "||",
    "$",
    "//",
    "\n",
    "é",
];

proptest! {
    #[test]
    fn token_soup_never_panics(picks in proptest::collection::vec(0..SOUP.len(), 0..80)) {
        let src: Vec<&str> = picks.iter().map(|&i| SOUP[i]).collect();
        let src = src.join(" ");
        let _ = parse(&src);
        let _ = parse(&format!("fn f() {{ {src} }}"));
    }

    #[test]
    fn byte_soup_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let src = String::from_utf8_lossy(&bytes);
        let _ = parse(&src);
    }

    #[test]
    fn errors_are_located(picks in proptest::collection::vec(0..SOUP.len(), 0..40)) {
        let src: Vec<&str> = picks.iter().map(|&i| SOUP[i]).collect();
        if let Err(e) = parse(&format!("fn f() {{ {} }}", src.join(" "))) {
            let pos = e.loc.pos;
            prop_assert!(pos.is_some_and(|p| p.line >= 1 && p.col >= 1));
            prop_assert!(!e.msg.is_empty() && !e.msg.ends_with('.'));
        }
    }
}
