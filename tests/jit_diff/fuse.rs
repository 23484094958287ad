//! Loop fusion (docs/codegen.md, "Loop fusion"): compiled code runs two
//! adjacent counted loops over the same range as one, and must still agree
//! with the interpreter bit for bit, in values, in the arrays left behind
//! and in errors (message, location, trace), on every length (0 and 1
//! included), with arrays passed twice, and with a failing access in either
//! loop. Every case runs with fusion on and off; the loops meant to fuse
//! are counted (`irad::codegen::fused_loops`), and so are the near misses
//! that must not.

use super::*;

const FUSE_SURFACE: &str = r#"
fn map_sum(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * 2.0 - 1.0;
    }
    let mut s = 0.5;
    for j in 0..n {
        s = s + c[j] * c[j];
    }
    s
}
fn first_fails(a: [f64], b: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * b[i];
    }
    let mut s = 0.0;
    for j in 0..n {
        s = s + c[j] / 3.0;
    }
    s
}
fn second_fails(a: [f64], b: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * 2.0;
    }
    let mut s = 0.0;
    for j in 0..n {
        s = s + c[j] * b[j];
    }
    s
}
fn in_place(a: [f64]) -> f64 {
    let n = len(a);
    for i in 0..n {
        a[i] = a[i] * 2.0 + 0.1;
    }
    let mut s = 0.0;
    for j in 0..n {
        s = s + a[j];
    }
    s
}
fn two_maps(a: [f64]) -> [f64] {
    let n = len(a);
    let c: [f64] = alloc(n);
    let d: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * 3.0 - 0.25;
    }
    for j in 0..n {
        d[j] = c[j] * c[j] + a[j];
    }
    d
}
fn alloc_between(a: [f64]) -> [f64] {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * 3.0 - 0.25;
    }
    let d: [f64] = alloc(n);
    for j in 0..n {
        d[j] = c[j] * c[j] + a[j];
    }
    d
}
fn lens(a: [f64]) -> f64 {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        c[i] = a[i] * 3.0 + 0.5;
    }
    let mut s = 0.0;
    for j in 0..len(a) {
        s = s + c[j] * a[j];
    }
    s
}
fn lens_differ(a: [f64], b: [f64]) -> f64 {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        c[i] = a[i] * 3.0;
    }
    let mut s = 0.0;
    for j in 0..len(b) {
        s = s + b[j];
    }
    s
}
fn cond_store(a: [f64]) -> f64 {
    let n = len(a);
    let c = zeros(n);
    for i in 0..n {
        if a[i] > 0.0 {
            c[i] = a[i] * 0.5;
        }
    }
    let mut s = 0.25;
    for j in 0..n {
        s = s + c[j];
    }
    s
}
fn three(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] + 1.0;
    }
    let mut s = 0.0;
    let u = n + 2;
    for j in 0..n {
        s = s + c[j];
    }
    let mut t = 1.0;
    for k in 0..n {
        t = t * a[k] + c[k];
    }
    s + t + f64(u)
}
fn rows(x: [f64], mu: [f64], d: i64) -> [f64] {
    let n = len(x) / d;
    let diff: [f64] = alloc(d);
    let out: [f64] = alloc(n);
    for r in 0..n {
        for j in 0..d {
            diff[j] = x[r * d + j] - mu[j];
        }
        let mut q = 0.0;
        for j in 0..d {
            q = q + diff[j] * diff[j];
        }
        out[r] = q;
    }
    out
}
fn bounds_differ(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * 2.0;
    }
    let mut s = 0.0;
    for j in 0..n - 1 {
        s = s + c[j];
    }
    s
}
fn starts_differ(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * 2.0;
    }
    let mut s = 0.0;
    for j in 1..n {
        s = s + c[j];
    }
    s
}
fn ahead(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n + 1);
    for i in 0..n {
        c[i] = a[i] * 2.0;
    }
    let mut s = 0.0;
    for j in 0..n {
        s = s + c[j + 1];
    }
    s
}
fn uses_first(a: [f64]) -> f64 {
    let n = len(a);
    let mut m = 0.0;
    for i in 0..n {
        m = max(m, a[i]);
    }
    let mut t = 0.0;
    for j in 0..n {
        t = t + a[j] - m;
    }
    t
}
fn both_fail(a: [f64], b: [f64]) -> f64 {
    let n = len(a);
    let mut s = 0.0;
    for i in 0..n {
        s = s + b[i];
    }
    let mut t = 0.0;
    for j in 0..n {
        t = t + b[j] * 2.0;
    }
    s + t
}
fn writes_param(a: [f64], b: [f64]) -> f64 {
    let n = len(a);
    let mut s = 0.0;
    for i in 0..n {
        s = s + b[i];
    }
    for j in 0..n {
        a[j] = a[j] + 1.0;
    }
    s
}
fn alias_shift(a: [f64], b: [f64]) -> f64 {
    let n = len(a) - 1;
    for i in 0..n {
        a[i] = a[i] + 1.0;
    }
    let mut s = 0.0;
    for j in 0..n {
        s = s + b[j + 1] * 0.5;
    }
    s
}
fn alias_write(a: [f64], b: [f64]) -> f64 {
    let n = len(a) - 1;
    let mut s = 0.0;
    for i in 0..n {
        s = s + a[i];
    }
    for j in 0..n {
        b[j + 1] = b[j + 1] * 2.0;
    }
    s
}
"#;

/// How many fusions each function gets.
const FUSED: &[(&str, usize)] = &[
    ("map_sum", 1),
    ("first_fails", 1),
    ("second_fails", 1),
    ("in_place", 1),
    ("two_maps", 1),
    ("lens", 1),
    ("cond_store", 1),
    ("three", 2),
    ("rows", 1),
    // An allocation between the loops (it may fail); lengths of two arrays;
    // different bounds or starts; a read one ahead; a result of the first
    // loop used by the second; both loops may fail; the safe loop writes
    // an argument while the other may fail; a write that may alias what
    // the first loop reads.
    ("alloc_between", 0),
    ("lens_differ", 0),
    ("bounds_differ", 0),
    ("starts_differ", 0),
    ("ahead", 0),
    ("uses_first", 0),
    ("both_fail", 0),
    ("writes_param", 0),
    ("alias_shift", 0),
    ("alias_write", 0),
];

fn fuse_module() -> Module {
    let src = Source {
        name: "fuse.irad".into(),
        text: FUSE_SURFACE.into(),
    };
    irad::load(&src).expect("the surface program loads")
}

/// Runs `f` on arguments `make()` builds (afresh for each run, so that
/// arrays passed twice stay one array) with the interpreter and with the
/// JIT, fusion on and off; asserts that outcomes and arguments afterwards
/// agree, and returns the interpreter's outcome.
fn check_fused(
    what: &str,
    m: &Module,
    f: FuncId,
    make: &dyn Fn() -> Vec<Val>,
) -> Result<Val, RunError> {
    let opts = RunOptions::default();
    let want_args = make();
    let want = run_on(Backend::Interp, m, f, &want_args, &opts);
    // Fusion on and off, and on with reductions vectorised too.
    let configs = [
        (true, irad::codegen::LoopVectors::Maps),
        (false, irad::codegen::LoopVectors::Maps),
        (true, irad::codegen::LoopVectors::MapsAndReductions),
    ];
    for (on, vectors) in configs {
        let args = make();
        let mut jit = irad::codegen::Jit::new(m).expect("a JIT");
        jit.set_loop_fusion(on);
        jit.set_loop_opts(true, vectors);
        let got = jit.run(f, &args, &opts);
        let what = format!("{what} (fusion {on}, {vectors:?})");
        assert_same_outcome(&what, m, &want, &got);
        assert_same_args(&what, m, &want_args, &args);
    }
    want
}

#[test]
fn the_loops_meant_to_fuse_do_and_near_misses_do_not() {
    let m = fuse_module();
    for &(name, want) in FUSED {
        let f = func(&m, name);
        assert_eq!(irad::codegen::fused_loops(&m[f]), want, "@{name}");
    }
    // The mixture objective's two innermost loops.
    let text = std::fs::read_to_string(manifest_dir().join("benches/programs/gmm.irad"))
        .expect("gmm.irad");
    let src = Source {
        name: "gmm.irad".into(),
        text,
    };
    let gmm = irad::load(&src).expect("gmm loads");
    assert_eq!(irad::codegen::fused_loops(&gmm[func(&gmm, "gmm")]), 1);
    assert_eq!(irad::codegen::fused_loops(&gmm[func(&gmm, "logsumexp")]), 0);
}

/// Inputs of mixed signs and magnitudes, with a NaN and a signed zero.
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|k| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            match k % 7 {
                3 => -0.0,
                5 if n > 6 => f64::NAN,
                _ => {
                    ((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
                        * 2f64.powi((k % 9) as i32 * 7 - 28)
                }
            }
        })
        .collect()
}

const LENGTHS: [usize; 7] = [0, 1, 2, 3, 5, 8, 17];

#[test]
fn fused_loops_agree_on_every_length() {
    let m = fuse_module();
    for &(name, _) in FUSED {
        let f = func(&m, name);
        let arity = m[f].param_types().len();
        for n in LENGTHS {
            let a = data(n, 1 + n as u64);
            let b = data(n + 1, 7 + n as u64);
            let make = || -> Vec<Val> {
                match (name, arity) {
                    ("rows", _) => vec![f64s(&a), f64s(&b[..2.min(b.len())]), Val::I64(2)],
                    (_, 1) => vec![f64s(&a)],
                    _ => vec![f64s(&a), f64s(&b)],
                }
            };
            let what = format!("@{name} n={n}");
            let r = check_fused(&what, &m, f, &make);
            assert!(r.is_ok(), "{what}: {r:?}");
        }
    }
}

/// An access out of range in either loop: the interpreter's error, after
/// the same writes to arguments, with fusion on and off.
#[test]
fn failing_accesses_fail_where_the_interpreter_fails() {
    let m = fuse_module();
    let mut failed = 0;
    for name in [
        "first_fails",
        "second_fails",
        "both_fail",
        "writes_param",
        "alias_write",
    ] {
        let f = func(&m, name);
        for n in LENGTHS {
            for nb in [0, 1, n.saturating_sub(1), n, n + 3] {
                let a = data(n, 3);
                let b = data(nb, 4);
                let make = || vec![f64s(&a), f64s(&b)];
                let what = format!("@{name} n={n} nb={nb}");
                let r = check_fused(&what, &m, f, &make);
                // `alias_write` runs len(a) - 1 iterations from b[1] on.
                let fails = nb < n && (name != "alias_write" || n >= 2);
                assert_eq!(r.is_err(), fails, "{what}: {r:?}");
                failed += usize::from(r.is_err());
            }
        }
    }
    assert!(failed >= 20, "{failed} runs failed");
    // The mixture's rows, with `mu` too short: the first loop fails.
    let f = func(&m, "rows");
    for (nx, nmu, d) in [(6, 1, 2), (6, 2, 3), (0, 0, 2), (3, 0, 1)] {
        let (x, mu) = (data(nx, 5), data(nmu, 6));
        let make = || vec![f64s(&x), f64s(&mu), Val::I64(d)];
        let what = format!("@rows nx={nx} nmu={nmu} d={d}");
        let r = check_fused(&what, &m, f, &make);
        assert_eq!(r.is_err(), nx >= d as usize && nmu < d as usize, "{what}");
    }
}

/// One array passed as both arguments: writes of one loop are reads of
/// the other.
#[test]
fn an_array_passed_twice_gives_the_interpreters_results() {
    let m = fuse_module();
    for name in [
        "first_fails",
        "second_fails",
        "writes_param",
        "alias_shift",
        "alias_write",
        "both_fail",
    ] {
        let f = func(&m, name);
        for n in LENGTHS {
            let a = data(n, 9);
            let make = || {
                let x = f64s(&a);
                vec![x.clone(), x]
            };
            let what = format!("@{name}(x, x) n={n}");
            let r = check_fused(&what, &m, f, &make);
            assert!(r.is_ok(), "{what}: {r:?}");
        }
    }
}

/// The mixture objective itself, with fusion on and off, and with `invs`
/// too short (the `logdet` loop, before the fused one, fails first).
#[test]
fn the_mixture_objective_agrees() {
    let text = std::fs::read_to_string(manifest_dir().join("benches/programs/gmm.irad"))
        .expect("gmm.irad");
    let src = Source {
        name: "gmm.irad".into(),
        text,
    };
    let m = irad::load(&src).expect("gmm loads");
    let f = func(&m, "gmm");
    let (k, d, n) = (3, 4, 5);
    for short in [0, 1, 5] {
        let mu = data(k * d, 11);
        let logw = data(k, 12);
        let invs: Vec<f64> = (0..k * d - short).map(|t| 0.5 + t as f64 * 0.25).collect();
        let x = data(n * d, 13);
        let make = || vec![f64s(&mu), f64s(&logw), f64s(&invs), f64s(&x)];
        let what = format!("@gmm short={short}");
        let r = check_fused(&what, &m, f, &make);
        assert_eq!(r.is_err(), short > 0, "{what}: {r:?}");
    }
}
