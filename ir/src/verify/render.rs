//! Prints functions with each verification error under the line it is about,
//! for IR that has no source text to point into (built by the builder or a
//! pass). Input: a module and errors from `verify_module`; output: the printed
//! text of every function that has an error, each error as a `# error: ...`
//! comment line under its statement, so the result is still IR text.

use super::{Place, VerifyError};
use crate::func::{FuncId, Module};
use crate::text::{Line, func_lines};

/// The functions that have errors, printed with each error under its line.
pub fn render_errors(m: &Module, errors: &[VerifyError]) -> String {
    let mut funcs: Vec<FuncId> = Vec::new();
    for e in errors {
        let f = func_of(&e.place);
        if !funcs.contains(&f) && m.get(f).is_some() {
            funcs.push(f);
        }
    }
    let mut out = String::new();
    for (n, &f) in funcs.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        for (line, text) in func_lines(m, f) {
            out.push_str(&text);
            out.push('\n');
            for e in errors.iter().filter(|e| is_about(&e.place, f, &line)) {
                let indent = if matches!(line, Line::Inst(_) | Line::Term(_)) {
                    "  "
                } else {
                    ""
                };
                out.push_str(&format!("{indent}# error: {}\n", e.msg));
            }
        }
    }
    out
}

fn func_of(place: &Place) -> FuncId {
    match *place {
        Place::Func(f) | Place::Block(f, _) | Place::Inst(f, _) | Place::Term(f, _) => f,
    }
}

/// Whether an error at `place` belongs under the printed `line` of function `f`.
fn is_about(place: &Place, f: FuncId, line: &Line) -> bool {
    match (*place, line) {
        (Place::Func(pf), Line::Header) => pf == f,
        (Place::Block(pf, b), Line::Label(lb)) => pf == f && b == *lb,
        (Place::Inst(pf, i), Line::Inst(li)) => pf == f && i == *li,
        (Place::Term(pf, b), Line::Term(lb)) => pf == f && b == *lb,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::render_errors;
    use crate::builder::FuncBuilder;
    use crate::func::{Module, Operand};
    use crate::prim::Prim;
    use crate::types::Type;
    use crate::verify::verify_module;

    #[test]
    fn errors_appear_under_their_lines() {
        let mut m = Module::new();
        let f = m
            .declare_func("f", vec![(Some("x".into()), Type::F64)], Type::F64)
            .expect("fresh name");
        let mut b = FuncBuilder::new(&mut m, f).expect("valid function");
        let entry = b.create_block();
        let exit = b.create_block();
        b.switch_to_block(entry).expect("valid block");
        let x = Operand::Value(b.param(0).expect("one parameter"));
        let y = b
            .prim(Prim::Sin, &[x])
            .expect("typed")
            .expect("has a result");
        b.goto(exit).expect("open block");
        b.switch_to_block(exit).expect("valid block");
        b.ret(Operand::Value(y)).expect("open block");
        assert!(verify_module(&m).is_ok());
        // Jumping back to the entry is the builder's to allow, the verifier's to refuse.
        m[f].blocks[exit].term = Some(crate::func::Terminator::Goto(entry));
        let errs = verify_module(&m).expect_err("a jump to the entry block");
        assert_eq!(
            render_errors(&m, &errs),
            "func @f(%x: f64) -> f64 {\n#1:\n  %0 = call sin(%x) :: f64\n  goto #2\n#2:\n  goto #1\n  # error: jump to the entry block #1: the entry block must have no predecessors\n}\n"
        );
    }
}
