//! How an embedding compiler makes irad IR without writing text: declare the
//! functions, append typed statements with `FuncBuilder`, verify, print and
//! run. Run it with `cargo run --example builder`; it prints the module and
//! the value of `@poly(2.0)`.

use irad::ir::interp::value::Val;
use irad::ir::interp::{RunOptions, run};
use irad::ir::{FuncBuilder, Module, Operand, Prim, Type};

/// `poly(x) = sum_{k<4} x^k`, as a loop with loop-carried phis.
fn build() -> Result<Module, irad::ir::BuildError> {
    let mut m = Module::new();
    let poly = m.declare_func("poly", vec![(Some("x".into()), Type::F64)], Type::F64)?;
    let mut b = FuncBuilder::new(&mut m, poly)?;
    let x: Operand = b.param(0)?.into();
    let entry = b.create_block();
    let head = b.create_block();
    let body = b.create_block();
    let exit = b.create_block();

    b.switch_to_block(entry)?;
    b.goto(head)?;

    // The phis name the back edge's values before they exist: add those entries later.
    b.switch_to_block(head)?;
    let k = b.phi(Type::I64, &[(entry, 0i64.into())])?;
    let acc = b.phi(Type::F64, &[(entry, 0.0.into())])?;
    let term = b.phi(Type::F64, &[(entry, 1.0.into())])?;
    let more = b
        .prim(Prim::Lt, &[k.into(), 4i64.into()])?
        .ok_or(missing())?;
    b.gotoifnot(more.into(), exit)?;

    b.switch_to_block(body)?;
    let acc1 = b
        .prim(Prim::Add, &[acc.into(), term.into()])?
        .ok_or(missing())?;
    let term1 = b.prim(Prim::Mul, &[term.into(), x])?.ok_or(missing())?;
    let k1 = b
        .prim(Prim::Iadd, &[k.into(), 1i64.into()])?
        .ok_or(missing())?;
    b.goto(head)?;
    b.add_phi_entry(k, body, k1.into())?;
    b.add_phi_entry(acc, body, acc1.into())?;
    b.add_phi_entry(term, body, term1.into())?;
    for (v, name) in [
        (k, "k"),
        (acc, "acc"),
        (term, "term"),
        (acc1, "acc1"),
        (term1, "term1"),
        (k1, "k1"),
    ] {
        b.set_name(v, name)?;
    }

    b.switch_to_block(exit)?;
    b.ret(acc.into())?;
    Ok(m)
}

fn missing() -> irad::ir::BuildError {
    irad::ir::BuildError::Type("expected a result".into())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let m = build()?;
    if let Err(errs) = irad::ir::verify::verify_module(&m) {
        return Err(irad::ir::verify::render_errors(&m, &errs).into());
    }
    print!("{}", irad::ir::text::print_module(&m));
    let poly = m.by_name("poly").ok_or("no @poly")?;
    let value = run(&m, poly, &[Val::F64(2.0)], &RunOptions::default())?;
    println!("@poly(2.0) = {}", value.display(&m));
    Ok(())
}
