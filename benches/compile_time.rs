//! Compile time of a gradient: a straight-line chain
//! `y0 = x; y_{k+1} = sin(y_k) * 1.0001 + 0.5 * y_k` (four statements per
//! step), built with the builder API, normalised, differentiated by reverse
//! mode (`@f.rev` and its pieces), optimised by the default schedule (over
//! the derived functions, as `irad grad` does) and compiled by the JIT, for
//! growing sizes (2 500 to 20 000 primal statements).
//! Prints the median of several runs of each phase per size and the time per
//! statement, which stays flat when compile time grows linearly.
//!
//! Run: `cargo bench --bench compile_time` (add `-- --quick` for fewer runs).

use irad::codegen::Jit;
use irad::passes::reverse::Reverse;
use std::time::{Duration, Instant};

#[path = "common/chain.rs"]
mod chain;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 7 };
    let registry = irad::rules::Registry::new();
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10} {:>14} {:>12}",
        "statements",
        "build",
        "reverse",
        "optimise",
        "jit",
        "primal jit",
        "total",
        "total/stmt",
        "opt/stmt"
    );
    let only: Option<usize> =
        std::env::args().find_map(|a| a.strip_prefix("--steps=")?.parse().ok());
    let sizes = only.map_or(vec![625, 1250, 2500, 5000], |n| vec![n]);
    for steps in sizes {
        let (mut build, mut rev, mut opt, mut jit, mut pjit, mut total) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        for _ in 0..runs {
            let t0 = Instant::now();
            let (mut m, _) = chain::chain(steps);
            let t1 = Instant::now();
            irad::passes::normalise(&mut m).expect("normalises");
            let f = m.by_name("chain").expect("declared");
            let before = m.len();
            let mut r = Reverse::new(&registry);
            let g = r.rev(&mut m, f).expect("differentiates");
            let t2 = Instant::now();
            let derived: Vec<_> = m.func_ids().skip(before).collect();
            let opts = irad::passes::optimise::OptOptions {
                verify: false,
                ..Default::default()
            };
            let schedule = irad::passes::optimise::default_schedule();
            irad::passes::optimise::optimise(&mut m, &schedule, Some(&derived), &opts)
                .expect("optimises");
            let t2o = Instant::now();
            let mut j = Jit::new(&m).expect("a JIT");
            j.compile(g).expect("compiles");
            let t3 = Instant::now();
            build.push(t1 - t0);
            rev.push(t2 - t1);
            opt.push(t2o - t2);
            jit.push(t3 - t2o);
            total.push(t3 - t0);
            let t4 = Instant::now();
            let mut pj = Jit::new(&m).expect("a JIT");
            pj.compile(f).expect("compiles");
            pjit.push(t4.elapsed());
        }
        let n = steps * 4;
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        let tot = median(total);
        let o = median(opt);
        println!(
            "{:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10} {:>11.2} us {:>9.2} us",
            n,
            ms(median(build)),
            ms(median(rev)),
            ms(o),
            ms(median(jit)),
            ms(median(pjit)),
            ms(tot),
            tot.as_secs_f64() * 1e6 / n as f64,
            o.as_secs_f64() * 1e6 / n as f64
        );
    }
}
