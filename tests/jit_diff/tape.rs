//! One JIT runs the forward sweep and the pullback of reverse mode as two
//! calls (as `grad_reverse` does): the tape carries over from the first to
//! the second, is empty after it, and everything agrees with one interpreter
//! doing the same.

use super::*;

const SWEEP_IR: &str = r"
func @g(%a: [f64], %x: f64, %n: i64) -> f64 {
#0:
  goto #1
#1:
  %i = phi [#0 => 0, #2 => %i1] :: i64
  %s = phi [#0 => %x, #2 => %s1] :: f64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #3
#2:
  %k = call length(%a) :: i64
  %j = call irem(%i, %k) :: i64
  %aj = call arrayref(%a, %j) :: f64
  %p = call mul(%s, %aj) :: f64
  %q = call sin(%p) :: f64
  %big = call gt(%q, 0.0) :: bool
  %s1 = call select(%big, %q, %p) :: f64
  call arrayset(%a, %j, %s1)
  %i1 = call iadd(%i, 1) :: i64
  goto #1
#3:
  return %s
}
";

#[test]
fn one_jit_keeps_the_tape_between_the_forward_sweep_and_the_pullback() {
    let mut m = ir(SWEEP_IR);
    irad::passes::normalise(&mut m).expect("normalises");
    let registry = irad::rules::Registry::new();
    let g = func(&m, "g");
    let (fwd, back) = Reverse::new(&registry)
        .rule(&mut m, g)
        .expect("reverse rule");
    let opts = RunOptions::default();
    let args = vec![
        f64s(&[0.5, -1.25, 2.0]),
        Val::F64(0.75),
        Val::I64(20),
        f64s(&[0.0; 3]),
    ];

    let (mut mi, mut mj) = (m.clone(), m.clone());
    let (mut ri, mut rj) = (Reverse::new(&registry), Reverse::new(&registry));
    let mut interp = Interpreter::with_rules(&mut mi, &mut ri);
    let mut jit = Jit::with_rules(&mut mj, &mut rj).expect("a JIT");
    let (ia, ja) = (copies(&args), copies(&args));
    assert_eq!(jit.tape_bytes(), 0);
    for round in 0..2 {
        let what = format!("round {round}");
        let want = interp.run(fwd, &ia, &opts);
        let got = jit.run(fwd, &ja, &opts);
        assert_same_outcome(&format!("{what}: forward sweep"), &m, &want, &got);
        assert_same_args(&format!("{what}: forward sweep"), &m, &ia, &ja);
        assert!(interp.stats().tape_bytes > 0);
        let on_tape = jit.tape_bytes();
        assert!(
            on_tape > 0,
            "{what}: the forward sweep left nothing on the tape"
        );
        // The arrays hold their values after the primal until the pullback.
        assert!(!identical(&ja[0], &args[0]), "{what}");

        let want = interp.run(back, &[Val::F64(1.0)], &opts);
        let got = jit.run(back, &[Val::F64(1.0)], &opts);
        assert_same_outcome(&format!("{what}: pullback"), &m, &want, &got);
        assert_same_args(&format!("{what}: pullback"), &m, &ia, &ja);
        assert_eq!(interp.stats().tape_bytes, 0);
        assert_eq!(jit.tape_bytes(), 0, "{what}: the pullback left the tape");
        assert!(identical(&ja[0], &args[0]), "{what}: arrays not restored");
        // One f64 parameter: its cotangent alone; the array's is in the shadow.
        assert!(matches!(got, Ok(Val::F64(_))), "{what}: {got:?}");
        assert!(!identical(&ja[3], &f64s(&[0.0; 3])), "{what}: no shadow");
        // Fresh shadows for the next round.
        for a in [&ia[3], &ja[3]] {
            *array_ref(a).0.borrow_mut() = ArrayData::F64(vec![0.0; 3]);
        }
    }

    // The pullback alone pops an empty tape, in both.
    let want = interp.run(back, &[Val::F64(1.0)], &opts);
    let got = jit.run(back, &[Val::F64(1.0)], &opts);
    assert_same_outcome("the pullback alone", &m, &want, &got);
    let err = want.expect_err("the tape is empty");
    assert!(err.msg.starts_with("pop from an empty tape of "), "{err}");
}
