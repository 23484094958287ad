//! The compile-chain program of the benchmarks, built with the builder API:
//! `y0 = x; y_{k+1} = sin(y_k) * 1.0001 + 0.5 * y_k`, four IR statements per
//! step (shared by `benches/ad.rs` and `benches/compile_time.rs`).

use irad::ir::{FuncBuilder, FuncId, Module, Operand, Prim, Type};

/// The chain of `steps` steps as a module with one function `@chain`.
pub fn chain(steps: usize) -> (Module, FuncId) {
    let mut m = Module::new();
    let f = m
        .declare_func("chain", vec![(Some("x".into()), Type::F64)], Type::F64)
        .expect("valid declaration");
    let mut b = FuncBuilder::new(&mut m, f).expect("function exists");
    let entry = b.create_block();
    b.switch_to_block(entry).expect("block exists");
    let mut y: Operand = b.param(0).expect("one parameter").into();
    for _ in 0..steps {
        let s = b.prim(Prim::Sin, &[y]).expect("typed").expect("a value");
        let t = b
            .prim(Prim::Mul, &[s.into(), 1.0001.into()])
            .expect("typed")
            .expect("a value");
        let h = b
            .prim(Prim::Mul, &[0.5.into(), y])
            .expect("typed")
            .expect("a value");
        y = b
            .prim(Prim::Add, &[t.into(), h.into()])
            .expect("typed")
            .expect("a value")
            .into();
    }
    b.ret(y).expect("returns f64");
    (m, f)
}
