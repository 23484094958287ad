//! irad as the middle-end of a small compiler: `calc.rs` lowers a toy
//! expression language to irad IR through the builder API; this program
//! compiles a `calc` program, asks irad for the gradient of each function
//! (reverse mode, JIT-compiled) and calls it, checking it against forward
//! mode. Run it with `cargo run --example embed` (or pass a `calc` file).

pub mod calc;

use irad::ir::interp::{RunOptions, Val};
use irad::{GradRequest, Mode};

/// The program compiled when no file is given.
pub const PROGRAM: &str = "
# A smooth function of two variables.
def f(x, y) = x * y + sin(x) / (1 + y ^ 2)
# A branch: the gradient follows the side taken.
def g(a, b) = if a > b then a * a - b else exp(b - a)
# A loop: sum of k x^k for k = 0..4, and a call of f.
def h(x) = sum k in 0..5 : k * x ^ 2 + f(x, k)
";

/// A value, its gradient by reverse mode and by forward mode.
pub type Derivatives = (f64, Vec<f64>, Vec<f64>);

/// Value and gradient of function `name` of `module` at `point`, by the
/// JIT-compiled reverse-mode gradient, and the forward-mode gradient.
pub fn gradients(
    module: &irad::ir::Module,
    name: &str,
    point: &[f64],
) -> Result<Derivatives, Box<dyn std::error::Error>> {
    let f = module.by_name(name).ok_or("no such function")?;
    let args: Vec<Val> = point.iter().map(|&x| Val::F64(x)).collect();
    let registry = irad::rules::Registry::new();
    let floats = |g: &irad::passes::forward::grad::Gradient| -> Vec<f64> {
        g.gradient
            .iter()
            .map(|x| match x {
                Some(Val::F64(v)) => *v,
                _ => f64::NAN,
            })
            .collect()
    };
    // Reverse mode, the default schedule and options: GradRequest::new.
    let rev = irad::jit_gradient(module, &registry, &GradRequest::new(f, &args))?;
    rev.compile()?;
    let g = rev.run(&args, &RunOptions::default())?;
    let Val::F64(value) = g.value else {
        return Err("the value is not an f64".into());
    };
    let fwd = irad::jit_gradient(
        module,
        &registry,
        &GradRequest {
            mode: Mode::Forward,
            ..GradRequest::new(f, &args)
        },
    )?;
    let h = fwd.run(&args, &RunOptions::default())?;
    Ok((value, floats(&g), floats(&h)))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let text = match std::env::args().nth(1) {
        Some(path) => std::fs::read_to_string(path)?,
        None => PROGRAM.to_string(),
    };
    let module = calc::compile(&text)?;
    print!("{}", irad::ir::text::print_module(&module));
    for func in module.func_ids().filter_map(|id| module.get(id)) {
        let point: Vec<f64> = (0..func.params.len()).map(|i| 0.5 + i as f64).collect();
        let (value, rev, fwd) = gradients(&module, &func.name, &point)?;
        println!("{}({point:?}) = {value}", func.name);
        println!("  gradient (reverse): {rev:?}");
        println!("  gradient (forward): {fwd:?}");
    }
    Ok(())
}
