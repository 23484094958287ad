//! Vectorised loops (docs/codegen.md, "Vectorisation"): compiled code runs
//! some map and reduction loops two iterations at a time, and must still
//! agree with the interpreter bit for bit, on every length (the vector loop,
//! the scalar remainder, neither), start, special value (NaN, infinities,
//! signed zeros, subnormals) and aliasing of argument arrays. The loops
//! meant to be vectorised are counted (`irad::codegen::vectorised_loops`),
//! and so are the near misses that must not be.

use super::*;
use irad::codegen::LoopVectors;

/// Loops that are vectorised (the count per function is in
/// [`VECTORISED`]) and near misses that are not.
const VECTOR_SURFACE: &str = r#"
fn map1(a: [f64]) -> [f64] {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        c[i] = a[i] * a[i] + 1.0;
    }
    c
}
fn ops(a: [f64], s: f64) -> [f64] {
    let n = len(a);
    let c = zeros(n);
    for i in 0..n {
        let x = a[i];
        c[i] = sqrt(abs(x)) / (x - s) + min(x, s) - max(-x, 0.5 * s);
    }
    c
}
fn minmax(a: [f64], s: f64) -> [f64] {
    let c = copy(a);
    for i in 0..len(c) {
        c[i] = max(min(c[i], s), -s) * s;
    }
    c
}
fn from_one(a: [f64]) -> [f64] {
    let c = copy(a);
    for i in 1..len(a) {
        c[i] = c[i] * 3.0 - a[i];
    }
    c
}
fn shifted(a: [f64]) -> [f64] {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) - 1 {
        c[i] = a[i + 1] - a[i];
    }
    c
}
fn inplace(a: [f64], b: [f64]) -> f64 {
    for i in 0..len(a) {
        a[i] = a[i] * 2.0 + 1.0;
    }
    for i in 0..len(b) {
        b[i] = b[i] * b[i] - 0.5;
    }
    b[0]
}
fn dot(a: [f64], s: f64) -> f64 {
    let mut t = s;
    for i in 0..len(a) {
        t = t + a[i] * a[i];
    }
    t
}
fn reductions(a: [f64], s: f64) -> (f64, f64, f64, f64, f64) {
    let mut d = s;
    let mut p = 1.0;
    let mut lo = inf;
    let mut hi = -inf;
    let mut u = 0.0;
    for i in 0..len(a) {
        d = d - a[i];
        p = a[i] * p;
        lo = min(lo, a[i]);
        hi = max(a[i] * s, hi);
        u = u + s;
    }
    (d, p, lo, hi, u)
}
fn rosen(x: [f64]) -> (f64, f64) {
    let mut s = 0.0;
    let mut t = 1.0;
    for i in 0..len(x) - 1 {
        let a = x[i + 1] - x[i] * x[i];
        let b = 1.0 - x[i];
        s = s + 100.0 * a * a + b * b;
        t = max(t - a, b) * 0.5;
    }
    (s, t)
}
fn rows(x: [f64], d: i64) -> [f64] {
    let n = len(x) / d;
    let t = zeros(d);
    for r in 0..n {
        for j in 0..d {
            t[j] = t[j] + x[r * d + j] * 2.0;
        }
    }
    t
}
fn picked(a: [f64], b: [f64], first: bool) -> [f64] {
    let g = if first { a } else { b };
    let c: [f64] = alloc(len(g));
    for i in 0..len(g) {
        c[i] = g[i] + 1.0;
    }
    c
}
fn recurrence(a: [f64]) -> [f64] {
    for i in 0..len(a) - 1 {
        a[i + 1] = a[i + 1] + a[i];
    }
    a
}
fn unproven(a: [f64], b: [f64]) -> [f64] {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        c[i] = a[i] * b[i];
    }
    c
}
fn inplace2(a: [f64], b: [f64]) -> f64 {
    for i in 0..len(a) {
        a[i] = a[i] * b[i] + 1.0;
    }
    a[0]
}
fn shifted_read(a: [f64], b: [f64], k: i64) -> [f64] {
    let c: [f64] = alloc(len(a));
    for i in 1..len(a) {
        c[i] = a[i] - b[i + k] * b[i - 1];
    }
    c
}
fn branchy(a: [f64]) -> [f64] {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        if a[i] > 0.0 {
            c[i] = a[i];
        }
    }
    c
}
fn called(a: [f64]) -> [f64] {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        c[i] = exp(a[i]);
    }
    c
}
fn lse(a: [f64]) -> f64 {
    let mut m = -inf;
    for i in 0..len(a) {
        m = max(m, a[i]);
    }
    let mut t = 0.0;
    for i in 0..len(a) {
        t = t + exp(a[i] - m);
    }
    m + log(t)
}
fn pushy(a: [f64], s: f64) -> f64 {
    let c: [f64] = alloc(len(a));
    let mut t = 0.0;
    for i in 0..len(a) {
        let x = a[i] * s;
        c[i] = exp(x) / (x * x + 1.0);
        t = t + c[i] * x;
    }
    t
}
fn log_of(a: [f64]) -> [f64] {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        c[i] = log(a[i]);
    }
    c
}
fn acc_read(a: [f64]) -> f64 {
    let mut t = 0.0;
    for i in 0..len(a) {
        t = t + a[i] * t;
    }
    t
}
"#;

/// The loops of each function that compiled code runs with vectors.
const VECTORISED: &[(&str, usize)] = &[
    ("map1", 1),
    ("ops", 1),
    ("minmax", 1),
    ("from_one", 1),
    ("shifted", 1),
    ("inplace", 2),
    ("dot", 1),
    ("reductions", 1),
    ("rosen", 1),
    ("rows", 1),
    ("picked", 1),
    ("lse", 2),
    ("unproven", 1),
    ("pushy", 1),
    ("inplace2", 1),
    ("shifted_read", 1),
    // An array written at one index and read at another; a branch; a call
    // other than exp; an accumulator read elsewhere.
    ("recurrence", 0),
    ("branchy", 0),
    ("called", 1),
    ("log_of", 0),
    ("acc_read", 0),
];

/// The functions of [`VECTORISED`] whose vectorised loops all have an
/// accumulator: vectorised only with `LoopVectors::MapsAndReductions`.
const REDUCTIONS: [&str; 5] = ["dot", "reductions", "rosen", "lse", "pushy"];

/// [`check_run`] (the interpreter against compiled code with the default
/// options, which vectorise map loops), then the interpreter against a JIT
/// that vectorises reductions too (not the default: `LoopVectors`), with
/// and without loop versioning.
fn check_all(
    what: &str,
    m: &Module,
    f: FuncId,
    args: &[Val],
    opts: &RunOptions,
) -> Result<Val, RunError> {
    let want = check_run(what, m, f, args, opts);
    // Without versioning too: a loop whose accesses are not all proven is
    // versioned first, and its copies are not vectorised (the test before
    // them ends in a branch, not a `goto`), so only then do the per-pair
    // index checks and the run-time overlap check run.
    for version in [true, false] {
        let interp_args = copies(args);
        let jit_args = copies(args);
        let again = run_on(Backend::Interp, m, f, &interp_args, opts);
        let mut jit = irad::codegen::Jit::new(m).expect("a JIT");
        jit.set_loop_opts(version, LoopVectors::MapsAndReductions);
        let got = jit.run(f, &jit_args, opts);
        let what = format!("{what} (reductions vectorised, versioning {version})");
        assert_same_outcome(&what, m, &again, &got);
        assert_same_args(&what, m, &interp_args, &jit_args);
    }
    want
}

fn vector_module() -> Module {
    let src = Source {
        name: "vector.irad".into(),
        text: VECTOR_SURFACE.into(),
    };
    irad::load(&src).expect("the surface program loads")
}

/// Special values, then ordinary ones: every length from `0..=n` is a prefix.
fn values(n: usize, seed: u64) -> Vec<f64> {
    const SPECIAL: [f64; 9] = [
        f64::NAN,
        -0.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        5e-324,
        -1.5,
        2.5,
        -0.0,
    ];
    let mut s = seed;
    (0..n)
        .map(|k| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if k % 3 == 1 {
                SPECIAL[(s >> 33) as usize % SPECIAL.len()]
            } else {
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0
            }
        })
        .collect()
}

/// Finite values of mixed signs and magnitudes (2^-30 to 2^30), whose
/// sums and products round differently in another order.
fn plain(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let m = (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
            m * 2f64.powi((s >> 3) as i32 % 61 - 30)
        })
        .collect()
}

const LENGTHS: [usize; 8] = [0, 1, 2, 3, 4, 5, 17, 64];

#[test]
fn the_loops_meant_to_be_vectorised_are_and_near_misses_are_not() {
    let m = vector_module();
    for &(name, want) in VECTORISED {
        let f = func(&m, name);
        assert_eq!(
            irad::codegen::vectorised_loops(&m[f], LoopVectors::MapsAndReductions),
            want,
            "@{name}"
        );
        // By default only the loops without an accumulator.
        let maps = if REDUCTIONS.contains(&name) { 0 } else { want };
        assert_eq!(
            irad::codegen::vectorised_loops(&m[f], LoopVectors::Maps),
            maps,
            "@{name} (maps only)"
        );
    }
    // Normalised as `irad run` and `irad grad` see it, too.
    let src = Source {
        name: "vector.irad".into(),
        text: VECTOR_SURFACE.into(),
    };
    let norm = irad::normalise(&src, &m).expect("the module normalises");
    for &(name, want) in VECTORISED {
        let f = func(&norm, name);
        assert_eq!(
            irad::codegen::vectorised_loops(&norm[f], LoopVectors::MapsAndReductions),
            want,
            "@{name} normalised"
        );
    }
}

#[test]
fn maps_and_reductions_agree_bit_for_bit_on_every_length() {
    let m = vector_module();
    let opts = RunOptions::default();
    for n in LENGTHS {
        for seed in 0..4 {
            let a = f64s(&values(n, seed));
            let b = f64s(&values(n, seed + 100));
            let p = f64s(&plain(n, seed));
            for s in [0.75, -0.0, f64::NAN, f64::INFINITY] {
                for name in ["ops", "minmax", "dot", "reductions"] {
                    for (x, which) in [(&a, "special"), (&p, "plain")] {
                        let what = format!("@{name} n={n} seed={seed} s={s} {which}");
                        check_all(&what, &m, func(&m, name), &[x.clone(), Val::F64(s)], &opts)
                            .expect("runs");
                    }
                }
            }
            for name in [
                "map1",
                "from_one",
                "shifted",
                "recurrence",
                "called",
                "rosen",
            ] {
                for (x, which) in [(&a, "special"), (&p, "plain")] {
                    let what = format!("@{name} n={n} seed={seed} {which}");
                    // `len(a) - 1` loops run no iteration on no elements:
                    // nothing here fails.
                    check_all(&what, &m, func(&m, name), std::slice::from_ref(x), &opts)
                        .expect("runs");
                }
            }
            let what = format!("@inplace n={n} seed={seed}");
            let r = check_all(
                &what,
                &m,
                func(&m, "inplace"),
                &[a.clone(), b.clone()],
                &opts,
            );
            assert_eq!(r.is_err(), n == 0, "{what}: only an empty b fails (b[0])");
            for first in [true, false] {
                let what = format!("@picked n={n} seed={seed} first={first}");
                let args = [a.clone(), b.clone(), Val::Bool(first)];
                check_all(&what, &m, func(&m, "picked"), &args, &opts).expect("runs");
            }
        }
    }
}

/// `exp` of both lanes at once: every path of the scalar `exp` (in range,
/// near overflow, subnormal results, out of range, NaN) in either lane
/// beside any other, as `tests/jit_diff/semantics.rs` covers the scalar code.
#[test]
fn vector_exp_agrees_in_every_lane_on_every_path() {
    let m = vector_module();
    let opts = RunOptions::default();
    let special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e-300,
        5e-324,
        709.782712893384,
        f64::from_bits(709.782712893384f64.to_bits() + 1),
        709.7,
        709.78,
        -745.1332191019411,
        -745.1332191019412,
        -744.4400719213812,
        -746.0,
        f64::from_bits((-746.0f64).to_bits() - 1),
        -708.3964185322641,
        -708.4,
        -707.0,
        1000.0,
        -1000.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MAX,
        f64::MIN,
    ];
    // Every ordered pair of special values as the two lanes of one vector,
    // once starting at an even index (a vector) and once at an odd one.
    let mut xs = Vec::new();
    for &a in &special {
        for &b in &special {
            xs.extend([a, b]);
        }
    }
    let mut shifted = vec![0.5];
    shifted.extend(&xs);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut random = Vec::new();
    for i in 0..4000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let u = (seed >> 11) as f64 / (1u64 << 53) as f64;
        random.push(match i % 6 {
            0 => -746.0 + u * 1456.0,
            1 => (u - 0.5) * 40.0,
            2 => (u - 0.5) * 1e-6,
            3 => -745.2 + u * 38.0,
            4 => 705.0 + u * 5.0,
            _ => -708.4 + u * 0.02,
        });
    }
    for (what, data) in [("pairs", &xs), ("shifted", &shifted), ("random", &random)] {
        let a = f64s(data);
        check_all(
            &format!("@called {what}"),
            &m,
            func(&m, "called"),
            std::slice::from_ref(&a),
            &opts,
        )
        .expect("runs");
        check_all(
            &format!("@lse {what}"),
            &m,
            func(&m, "lse"),
            std::slice::from_ref(&a),
            &opts,
        )
        .expect("runs");
    }
}

#[test]
fn row_loops_agree_for_every_width() {
    let m = vector_module();
    let opts = RunOptions::default();
    for d in [1, 2, 3, 5, 8] {
        for rows in [0, 1, 3] {
            let x = f64s(&values(d * rows, d as u64));
            let what = format!("@rows d={d} rows={rows}");
            check_all(&what, &m, func(&m, "rows"), &[x, Val::I64(d as i64)], &opts).expect("runs");
        }
    }
}

/// Accesses not proven in range: each pair of iterations is checked first,
/// and the scalar loop takes over when either index is out of range, so
/// the error is the interpreter's (same iteration, statement, operands) and
/// the arrays hold what the interpreter leaves in them.
#[test]
fn checked_accesses_fail_where_the_interpreter_fails() {
    let m = vector_module();
    let opts = RunOptions::default();
    let mut failed = 0;
    for n in [0, 1, 2, 3, 4, 5, 17] {
        for nb in [0, 1, 2, 3, 4, 5, 6, 16, 17, 18, 19] {
            let a = f64s(&plain(n, 1));
            let b = f64s(&values(nb, 2));
            let what = format!("@unproven n={n} nb={nb}");
            let r = check_all(
                &what,
                &m,
                func(&m, "unproven"),
                &[a.clone(), b.clone()],
                &opts,
            );
            assert_eq!(r.is_err(), nb < n, "{what}");
            failed += usize::from(r.is_err());
            let what = format!("@inplace2 n={n} nb={nb}");
            let r = check_all(
                &what,
                &m,
                func(&m, "inplace2"),
                &[a.clone(), b.clone()],
                &opts,
            );
            assert_eq!(r.is_err(), nb < n || n == 0, "{what}");
            for k in [-3, -1, 0, 1, 2] {
                let what = format!("@shifted_read n={n} nb={nb} k={k}");
                let args = [a.clone(), b.clone(), Val::I64(k)];
                let r = check_all(&what, &m, func(&m, "shifted_read"), &args, &opts);
                failed += usize::from(r.is_err());
            }
        }
    }
    assert!(
        failed > 100,
        "the cases exercise the failing path ({failed})"
    );
}

/// The same array passed as both arguments: `@inplace` writes it twice over,
/// and each backend must see its own writes; `@picked` reads it through a
/// join; `@inplace2` reads and writes it at one index (which the run-time
/// alias check allows).
#[test]
fn one_array_as_two_arguments_agrees() {
    let m = vector_module();
    let opts = RunOptions::default();
    for n in LENGTHS {
        let data = values(n, 7);
        let mut outs = Vec::new();
        for backend in [Backend::Interp, Backend::Jit] {
            let a = f64s(&data);
            let r = run_on(
                backend,
                &m,
                func(&m, "inplace"),
                &[a.clone(), a.clone()],
                &opts,
            );
            let p = run_on(
                backend,
                &m,
                func(&m, "picked"),
                &[a.clone(), a.clone(), Val::Bool(false)],
                &opts,
            );
            let q = run_on(
                backend,
                &m,
                func(&m, "inplace2"),
                &[a.clone(), a.clone()],
                &opts,
            );
            outs.push((r, p, q, a));
        }
        let (ri, pi, qi, ai) = &outs[0];
        let (rj, pj, qj, aj) = &outs[1];
        let what = format!("aliased n={n}");
        assert_same_outcome(&what, &m, ri, rj);
        assert_same_outcome(&what, &m, pi, pj);
        assert_same_outcome(&what, &m, qi, qj);
        assert_same_args(
            &what,
            &m,
            std::slice::from_ref(ai),
            std::slice::from_ref(aj),
        );
    }
}

/// Reverse mode's forward sweeps push values in some of their loops; those
/// are vectorised too (both iterations' pushes stored at once), and the
/// pullbacks pop what the scalar code would have pushed (checked by the
/// gradients below).
#[test]
fn forward_sweeps_that_push_are_vectorised() {
    let mut m = vector_module();
    irad::passes::normalise(&mut m).expect("normalises");
    let registry = irad::rules::Registry::new();
    // @lse's sum of exp pushes each exp (its maximum pushes a comparison
    // of the accumulator: not vectorised); @pushy's loop pushes.
    for (name, want) in [("lse", 1), ("pushy", 1)] {
        let f = func(&m, name);
        let (fwd, _) = Reverse::new(&registry)
            .rule(&mut m, f)
            .expect("reverse rule");
        let pushes = m[fwd]
            .insts
            .values()
            .filter(|d| {
                matches!(
                    d.kind,
                    irad::ir::InstKind::Prim {
                        prim: Prim::Push,
                        ..
                    }
                )
            })
            .count();
        assert!(pushes > 0, "@{name}.rev.fwd pushes");
        assert_eq!(
            irad::codegen::vectorised_loops(&m[fwd], LoopVectors::MapsAndReductions),
            want,
            "@{name}.rev.fwd"
        );
    }
}

/// Gradients go through vectorised primal and derived loops alike.
#[test]
fn gradients_of_vectorised_loops_agree() {
    let src = Source {
        name: "vector.irad".into(),
        text: VECTOR_SURFACE.into(),
    };
    let m = vector_module();
    for n in [0, 1, 2, 3, 17] {
        let a = f64s(
            &values(n, 3)
                .iter()
                .map(|x| x.clamp(-3.0, 3.0))
                .collect::<Vec<_>>(),
        );
        let p = f64s(
            &plain(n, 5)
                .iter()
                .map(|x| x.clamp(-3.0, 3.0))
                .collect::<Vec<_>>(),
        );
        for x in [&a, &p] {
            for name in ["dot", "pushy"] {
                for mode in [Mode::Reverse, fwd(1), fwd(3)] {
                    let what = format!("@{name} n={n}");
                    let args = [x.clone(), Val::F64(0.5)];
                    assert!(
                        check_grad(&what, mode, &src, &m, func(&m, name), &args),
                        "{what}"
                    );
                }
            }
            for mode in [Mode::Reverse, fwd(2)] {
                let what = format!("@lse n={n}");
                let args = std::slice::from_ref(x);
                assert!(
                    check_grad(&what, mode, &src, &m, func(&m, "lse"), args),
                    "{what}"
                );
            }
        }
    }
}
