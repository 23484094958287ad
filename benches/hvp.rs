//! The cost of a Hessian-vector product against the gradient's (issue 23's
//! targets: at most 4x on rosenbrock at n = 100 000 and on Lotka-Volterra),
//! by forward over reverse (the default) and by reverse over forward,
//! and of a Hessian of 10 inputs against one HVP (at most 10), dense
//! Hessians against sparse ones (rosenbrock, n = 10, 100, 1000), and HVPs
//! by forward over forward and by forward over sparse against forward over
//! reverse on few inputs (rosenbrock, n = 4, 10, 100; Lotka-Volterra), and
//! forward over sparse against the gradient on the two large cases, in compiled
//! code only: every run the derivative makes is repeated, once to compile
//! and warm up and then 20 times, and the best time counts (derivation and
//! compilation do not). Prints one line per figure; the results are in
//! docs/performance.md. Run: `cargo bench --bench hvp`.

use irad::{GradOptions, GradRequest, HvpMode, Val};

/// `args` with every f64 replaced by `f(x, k)`, k counting them in order
/// (the cases have f64 scalars and f64 arrays only).
fn map_args(args: &[Val], f: &dyn Fn(f64, usize) -> f64) -> Vec<Val> {
    let mut k = 0;
    let mut next = |x: f64| {
        k += 1;
        f(x, k - 1)
    };
    args.iter()
        .map(|a| match a {
            Val::F64(x) => Val::F64(next(*x)),
            Val::Array(arr) => match &*arr.0.borrow() {
                irad::ir::interp::ArrayData::F64(xs) => {
                    Val::f64_array(xs.iter().map(|&x| next(x)).collect())
                }
                _ => a.clone(),
            },
            other => other.clone(),
        })
        .collect()
}

thread_local! {
    /// The best time of each run [`timed_jit`] made, in order.
    static TIMES: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The JIT, each run repeated (once to compile and warm up, then 20 times)
/// and its best time recorded in [`TIMES`]; the last run's result is kept.
fn timed_jit<'m>(
    m: &'m mut irad::ir::Module,
    p: &'m mut dyn irad::ir::interp::RuleProvider,
) -> Result<Box<dyn irad::ir::interp::Executor + 'm>, irad::RunError> {
    struct Timed<'m>(Box<dyn irad::ir::interp::Executor + 'm>);
    impl irad::ir::interp::Executor for Timed<'_> {
        fn run(
            &mut self,
            f: irad::ir::FuncId,
            args: &[Val],
            opts: &irad::RunOptions,
        ) -> Result<Val, irad::RunError> {
            let mut out = self.0.run(f, args, opts)?;
            let mut best = f64::INFINITY;
            for _ in 0..20 {
                let t = std::time::Instant::now();
                out = self.0.run(f, args, opts)?;
                best = best.min(t.elapsed().as_secs_f64());
            }
            TIMES.with(|t| t.borrow_mut().push(best));
            Ok(out)
        }
    }
    Ok(Box::new(Timed(irad::codegen::jit_with_rules(m, p)?)))
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let n = 100_000;
    let x: Vec<f64> = (0..n)
        .map(|i| 0.5 + 0.3 * ((i * 37 % 101) as f64 / 101.0))
        .collect();
    let cases: [(&str, &str, Vec<Val>); 2] = [
        (
            "examples/rosenbrock.irad",
            "rosenbrock",
            vec![Val::f64_array(x.clone())],
        ),
        (
            "benches/programs/lotka_volterra.irad",
            "lotka_volterra",
            [1.5, 1.0, 3.0, 1.0].map(Val::F64).to_vec(),
        ),
    ];
    let registry = irad::rules::Registry::new();
    for (file, func, args) in cases {
        let src = irad::read_source(&root.join(file)).expect("program");
        let m = irad::load(&src).expect("loads");
        let f = irad::find_function(&src, &m, func).expect("function");
        let r = GradRequest {
            opts: GradOptions {
                exec: timed_jit,
                ..GradOptions::default()
            },
            ..GradRequest::new(f, &args)
        };
        TIMES.with(|t| t.borrow_mut().clear());
        irad::grad(&src, &m, &registry, &r).expect("grad");
        let grad: f64 = TIMES.with(|t| t.borrow().iter().sum());
        TIMES.with(|t| t.borrow_mut().clear());
        let v = map_args(&args, &|_, i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0);
        irad::hvp(&src, &m, &registry, &r, &v).expect("hvp");
        let hvp: f64 = TIMES.with(|t| t.borrow().iter().sum());
        TIMES.with(|t| t.borrow_mut().clear());
        irad::hvp_via(&src, &m, &registry, &r, &v, HvpMode::ReverseOverForward)
            .expect("hvp by reverse over forward");
        let rof: f64 = TIMES.with(|t| t.borrow().iter().sum());
        TIMES.with(|t| t.borrow_mut().clear());
        irad::hvp_via(&src, &m, &registry, &r, &v, HvpMode::ForwardOverSparse)
            .expect("hvp by forward over sparse");
        let fos: f64 = TIMES.with(|t| t.borrow().iter().sum());
        println!(
            "{func}: gradient {:.3} ms, hvp {:.3} ms, ratio {:.2}; reverse over forward {:.3} ms, ratio {:.2}; forward over sparse {:.3} ms, ratio {:.2}",
            grad * 1e3,
            hvp * 1e3,
            hvp / grad,
            rof * 1e3,
            rof / grad,
            fos * 1e3,
            fos / grad
        );
        assert!(hvp.is_finite() && rof.is_finite() && fos.is_finite() && grad > 0.0);
    }
    // A Hessian of 10 inputs (rosenbrock, n = 10) against one HVP.
    let src = irad::read_source(&root.join("examples/rosenbrock.irad")).expect("program");
    let m = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &m, "rosenbrock").expect("function");
    let args = [Val::f64_array(x[..10].to_vec())];
    let r = GradRequest {
        opts: GradOptions {
            exec: timed_jit,
            ..GradOptions::default()
        },
        ..GradRequest::new(f, &args)
    };
    TIMES.with(|t| t.borrow_mut().clear());
    let v = map_args(&args, &|_, i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0);
    irad::hvp(&src, &m, &registry, &r, &v).expect("hvp");
    let hvp: f64 = TIMES.with(|t| t.borrow().iter().sum());
    TIMES.with(|t| t.borrow_mut().clear());
    irad::hessian(&src, &m, &registry, &r).expect("hessian");
    let hessian: f64 = TIMES.with(|t| t.borrow().iter().sum());
    println!(
        "rosenbrock n = 10: hvp {:.2} us, hessian {:.2} us, {:.2} HVPs",
        hvp * 1e6,
        hessian * 1e6,
        hessian / hvp
    );
    // Dense Hessians (batches of 8, forward over reverse) against sparse
    // ones (one run of sparse forward mode over the pieces), by size.
    for n in [10, 100, 1000] {
        let args = [Val::f64_array(x[..n].to_vec())];
        let mut r = GradRequest {
            opts: GradOptions {
                exec: timed_jit,
                ..GradOptions::default()
            },
            ..GradRequest::new(f, &args)
        };
        TIMES.with(|t| t.borrow_mut().clear());
        irad::hessian(&src, &m, &registry, &r).expect("hessian");
        let dense: f64 = TIMES.with(|t| t.borrow().iter().sum());
        r.opts.lanes = irad::ir::Lanes::Sparse;
        TIMES.with(|t| t.borrow_mut().clear());
        irad::hessian_via(&src, &m, &registry, &r, HvpMode::ForwardOverReverse)
            .expect("sparse hessian");
        let sparse: f64 = TIMES.with(|t| t.borrow().iter().sum());
        println!(
            "rosenbrock n = {n}: hessian dense {:.2} us, sparse {:.2} us, ratio {:.2}",
            dense * 1e6,
            sparse * 1e6,
            sparse / dense
        );
    }
    // Forward over forward (ceil(n / 8) runs of `@f.fwd.fwdN`) against
    // forward over reverse (one run of `@f.vjp.fwd`), few inputs.
    let lv = irad::read_source(&root.join("benches/programs/lotka_volterra.irad")).expect("lv");
    let lv_m = irad::load(&lv).expect("loads");
    let lv_f = irad::find_function(&lv, &lv_m, "lotka_volterra").expect("function");
    let lv_args = [1.5, 1.0, 3.0, 1.0].map(Val::F64).to_vec();
    let small = |n: usize| vec![Val::f64_array(x[..n].to_vec())];
    let cases: [(
        String,
        &irad::Source,
        &irad::ir::Module,
        irad::ir::FuncId,
        Vec<Val>,
    ); 4] = [
        ("rosenbrock n = 4".into(), &src, &m, f, small(4)),
        ("rosenbrock n = 10".into(), &src, &m, f, small(10)),
        ("rosenbrock n = 100".into(), &src, &m, f, small(100)),
        ("lotka_volterra".into(), &lv, &lv_m, lv_f, lv_args),
    ];
    for (label, src, m, f, args) in cases {
        let r = GradRequest {
            opts: GradOptions {
                exec: timed_jit,
                ..GradOptions::default()
            },
            ..GradRequest::new(f, &args)
        };
        let v = map_args(&args, &|_, i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0);
        let time = |mode| {
            TIMES.with(|t| t.borrow_mut().clear());
            irad::hvp_via(src, m, &registry, &r, &v, mode).expect("hvp");
            TIMES.with(|t| t.borrow().iter().sum::<f64>())
        };
        let for_ = time(HvpMode::ForwardOverReverse);
        let fof = time(HvpMode::ForwardOverForward);
        let fos = time(HvpMode::ForwardOverSparse);
        println!(
            "{label}: hvp forward over reverse {:.2} us, forward over forward {:.2} us, ratio {:.2}, forward over sparse {:.2} us, ratio {:.2}",
            for_ * 1e6,
            fof * 1e6,
            fof / for_,
            fos * 1e6,
            fos / for_
        );
        assert!(for_ > 0.0 && fof.is_finite() && fos.is_finite());
    }
}
