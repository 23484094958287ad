//! Compile time of a gradient: a straight-line chain
//! `y0 = x; y_{k+1} = sin(y_k) * 1.0001 + 0.5 * y_k` (four statements per
//! step), built with the builder API, normalised, differentiated by reverse
//! mode (`@f.rev` and its pieces) and compiled by the JIT, for growing sizes.
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
        "{:>10} {:>10} {:>10} {:>10} {:>12} {:>10} {:>14}",
        "statements", "build", "reverse", "jit", "primal jit", "total", "total/stmt"
    );
    let only: Option<usize> =
        std::env::args().find_map(|a| a.strip_prefix("--steps=")?.parse().ok());
    let sizes = only.map_or(vec![625, 1250, 2500, 5000], |n| vec![n]);
    for steps in sizes {
        let (mut build, mut rev, mut jit, mut pjit, mut total) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let t0 = Instant::now();
            let (mut m, _) = chain::chain(steps);
            let t1 = Instant::now();
            irad::passes::normalise(&mut m).expect("normalises");
            let f = m.by_name("chain").expect("declared");
            let mut r = Reverse::new(&registry);
            let g = r.rev(&mut m, f).expect("differentiates");
            let t2 = Instant::now();
            let mut j = Jit::new(&m).expect("a JIT");
            j.compile(g).expect("compiles");
            let t3 = Instant::now();
            build.push(t1 - t0);
            rev.push(t2 - t1);
            jit.push(t3 - t2);
            total.push(t3 - t0);
            let t4 = Instant::now();
            let mut pj = Jit::new(&m).expect("a JIT");
            pj.compile(f).expect("compiles");
            pjit.push(t4.elapsed());
        }
        let n = steps * 4;
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        let tot = median(total);
        println!(
            "{:>10} {:>10} {:>10} {:>10} {:>12} {:>10} {:>11.2} us",
            n,
            ms(median(build)),
            ms(median(rev)),
            ms(median(jit)),
            ms(median(pjit)),
            ms(tot),
            tot.as_secs_f64() * 1e6 / n as f64
        );
    }
}
