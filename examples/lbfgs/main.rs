//! irad's compiled gradient driving a real optimiser: the Rosenbrock
//! function of `examples/rosenbrock.irad`, in 10 dimensions, minimised with
//! L-BFGS (and a More-Thuente line search) from the `argmin` crate. irad
//! derives and JIT-compiles the gradient once; argmin calls the compiled
//! value and gradient at every point it tries, through the typed calls
//! (`value`, `gradient_into`: slices in, the gradient written into argmin's
//! vector, no boxed values).
//!
//! Run it with `cargo run --release --example lbfgs`; `tests/lbfgs_example.rs`
//! runs [`minimise`] and checks the minimum it finds.

use argmin::core::{CostFunction, Executor, Gradient, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use irad::{ArgRef, CompiledGradient, GradOut, GradRequest, Source, Val};
use std::cell::Cell;
use std::rc::Rc;

/// The program: the Rosenbrock function over an array, as the examples
/// write it.
pub const PROGRAM: &str = include_str!("../rosenbrock.irad");

/// What the optimiser found.
#[derive(Debug)]
pub struct Minimum {
    /// The point.
    pub x: Vec<f64>,
    /// The function's value there.
    pub cost: f64,
    /// L-BFGS iterations.
    pub iterations: u64,
    /// Calls of the compiled function (the value alone).
    pub cost_calls: usize,
    /// Calls of the compiled gradient.
    pub gradient_calls: usize,
}

/// The problem argmin sees: the compiled value and gradient of
/// `@rosenbrock` (callable through `&self`, as argmin's traits call).
struct Rosenbrock {
    src: Source,
    grad: CompiledGradient,
    /// Calls of the value and of the gradient, shared with [`minimise`].
    calls: Rc<Cell<(usize, usize)>>,
}

/// An irad error as argmin's error type, rendered with its source.
fn argmin_error(src: &Source, e: impl Into<irad::Error>) -> argmin::core::Error {
    argmin::core::Error::msg(e.into().in_file(&src.name).render(&[src]))
}

impl CostFunction for Rosenbrock {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, x: &Vec<f64>) -> Result<f64, argmin::core::Error> {
        let (c, g) = self.calls.get();
        self.calls.set((c + 1, g));
        self.grad
            .value(&[ArgRef::Slice(x)])
            .map_err(|e| argmin_error(&self.src, e))
    }
}

impl Gradient for Rosenbrock {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, x: &Vec<f64>) -> Result<Vec<f64>, argmin::core::Error> {
        let (c, g) = self.calls.get();
        self.calls.set((c, g + 1));
        let mut g = vec![0.0; x.len()];
        self.grad
            .gradient_into(&[ArgRef::Slice(x)], &mut [GradOut::Slice(&mut g)])
            .map_err(|e| argmin_error(&self.src, e))?;
        Ok(g)
    }
}

/// Minimises the Rosenbrock function from `x0` with L-BFGS (memory 7) until
/// the gradient's norm is below 1e-10 or 200 iterations have run.
pub fn minimise(x0: Vec<f64>) -> Result<Minimum, Box<dyn std::error::Error>> {
    let src = Source::new("rosenbrock.irad", PROGRAM);
    let module = irad::load(&src)?;
    let f = irad::find_function(&src, &module, "rosenbrock")?;
    let registry = irad::rules::Registry::new();
    // Derived (reverse mode), optimised and compiled once, for arguments
    // shaped like x0.
    let args = [Val::f64_array(x0.clone())];
    let grad = irad::jit_gradient(&module, &registry, &GradRequest::new(f, &args))
        .map_err(|e| irad::Error::from(e).in_file(&src.name).render(&[&src]))?;
    grad.compile()?;
    let calls = Rc::new(Cell::new((0, 0)));
    let problem = Rosenbrock {
        src,
        grad,
        calls: Rc::clone(&calls),
    };
    let solver = LBFGS::new(MoreThuenteLineSearch::new(), 7)
        .with_tolerance_grad(1e-10)?
        .with_tolerance_cost(0.0)?;
    let res = Executor::new(problem, solver)
        .configure(|state| state.param(x0).max_iters(200))
        .run()?;
    let state = res.state();
    let x = state
        .get_best_param()
        .cloned()
        .ok_or("no point was found")?;
    let (cost_calls, gradient_calls) = calls.get();
    Ok(Minimum {
        x,
        cost: state.get_best_cost(),
        iterations: state.get_iter(),
        cost_calls,
        gradient_calls,
    })
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The classic start (-1.2, 1) repeated.
    let x0: Vec<f64> = (0..10)
        .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
        .collect();
    let m = minimise(x0)?;
    println!(
        "minimum {:.3e} after {} iterations ({} value and {} gradient calls)",
        m.cost, m.iterations, m.cost_calls, m.gradient_calls
    );
    let shown: Vec<String> = m.x.iter().map(|x| format!("{x:.6}")).collect();
    println!("at x = [{}]", shown.join(", "));
    Ok(())
}
