//! The embedding API of compiled code (`irad::jit_primal`, `jit_forward`,
//! `jit_reverse`): modules built or parsed in process, derived, compiled once
//! and called many times, with the interpreter's results bit for bit.

use irad::ir::interp::{ArrayData, RunOptions, Val};
use irad::ir::{FuncBuilder, Module, Prim, Type};
use std::rc::Rc;

/// `f(x: [f64], c: f64) = c * sum_i sin(x[i]) * x[i]`, built with the builder API.
fn sum_module() -> Module {
    let mut m = Module::new();
    let f = m
        .declare_func(
            "f",
            vec![
                (Some("x".into()), Type::Array(irad::ir::Scalar::F64)),
                (Some("c".into()), Type::F64),
            ],
            Type::F64,
        )
        .unwrap();
    let mut b = FuncBuilder::new(&mut m, f).unwrap();
    let entry = b.create_block();
    let head = b.create_block();
    let body = b.create_block();
    let exit = b.create_block();
    b.switch_to_block(entry).unwrap();
    let x = b.param(0).unwrap();
    let c = b.param(1).unwrap();
    let n = b.prim(Prim::Length, &[x.into()]).unwrap().unwrap();
    b.goto(head).unwrap();
    b.switch_to_block(head).unwrap();
    let i = b.phi(Type::I64, &[(entry, 0i64.into())]).unwrap();
    let acc = b.phi(Type::F64, &[(entry, 0.0.into())]).unwrap();
    let more = b.prim(Prim::Lt, &[i.into(), n.into()]).unwrap().unwrap();
    b.gotoifnot(more.into(), exit).unwrap();
    b.switch_to_block(body).unwrap();
    let xi = b
        .prim(Prim::Arrayref, &[x.into(), i.into()])
        .unwrap()
        .unwrap();
    let s = b.prim(Prim::Sin, &[xi.into()]).unwrap().unwrap();
    let t = b.prim(Prim::Mul, &[s.into(), xi.into()]).unwrap().unwrap();
    let acc2 = b.prim(Prim::Add, &[acc.into(), t.into()]).unwrap().unwrap();
    let i2 = b
        .prim(Prim::Iadd, &[i.into(), 1i64.into()])
        .unwrap()
        .unwrap();
    b.add_phi_entry(i, body, i2.into()).unwrap();
    b.add_phi_entry(acc, body, acc2.into()).unwrap();
    b.goto(head).unwrap();
    b.switch_to_block(exit).unwrap();
    let r = b.prim(Prim::Mul, &[c.into(), acc.into()]).unwrap().unwrap();
    b.ret(r.into()).unwrap();
    irad::ir::verify::verify_module(&m).expect("the built module verifies");
    m
}

fn array(xs: &[f64]) -> Val {
    Val::f64_array(xs.to_vec())
}

fn floats(v: &Val) -> Vec<f64> {
    match v {
        Val::F64(x) => vec![*x],
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => xs.clone(),
            other => panic!("not an f64 array: {other:?}"),
        },
        Val::Tuple(vs) | Val::Dual(vs) => vs.iter().flat_map(floats).collect(),
        other => panic!("not numeric: {other:?}"),
    }
}

fn bits(xs: &[f64]) -> Vec<u64> {
    xs.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn primal_reverse_and_forward_agree_with_the_interpreter() {
    let m = sum_module();
    let f = m.by_name("f").unwrap();
    let registry = irad::rules::Registry::new();
    let xs = [0.3, -1.2, 2.5, 0.0, 7.0];
    let opts = RunOptions::default();

    // Primal.
    let p = irad::jit_primal(&m).unwrap();
    let args = [array(&xs), Val::F64(1.5)];
    let got = p.call(f, &args, &opts).unwrap();
    let want = irad::ir::interp::run(&m, f, &args, &opts).unwrap();
    assert_eq!(bits(&floats(&got)), bits(&floats(&want)));

    // Reverse: @f.rev(x, c, dx_shadow, seed) -> (value, dc); dx added into the shadow.
    let r = irad::jit_reverse(&m, &[f], &registry).unwrap();
    let rev = r.func("f.rev").unwrap();
    let (g, _) = irad::grad_reverse(
        &irad::source_from_bytes("sum".into(), Vec::new()).unwrap(),
        &m,
        f,
        &args,
        &registry,
        &Default::default(),
    )
    .unwrap();
    // Call it twice: the second call runs the code compiled by the first.
    for _ in 0..2 {
        let shadow = array(&[0.0; 5]);
        let out = r
            .call(
                rev,
                &[array(&xs), Val::F64(1.5), shadow.clone(), Val::F64(1.0)],
                &opts,
            )
            .unwrap();
        let out = floats(&out);
        assert_eq!(out[0].to_bits(), floats(&g.value)[0].to_bits());
        assert_eq!(
            bits(&floats(&shadow)),
            bits(&floats(g.gradient[0].as_ref().unwrap()))
        );
        assert_eq!(
            out[1].to_bits(),
            floats(g.gradient[1].as_ref().unwrap())[0].to_bits()
        );
    }

    // Forward, width 1: the tangent of c = 1 gives df/dc.
    let fw = irad::jit_forward(&m, &[f], irad::ir::Lanes::ONE, &registry).unwrap();
    let rule = fw.func("f.fwd").unwrap();
    let dual_x = Val::Dual(Rc::from(vec![array(&xs), array(&[0.0; 5])]));
    let dual_c = Val::Dual(Rc::from(vec![Val::F64(1.5), Val::F64(1.0)]));
    let out = fw.call(rule, &[dual_x, dual_c], &opts).unwrap();
    let out = floats(&out);
    assert_eq!(out[0].to_bits(), floats(&g.value)[0].to_bits());
    let dc = floats(g.gradient[1].as_ref().unwrap())[0];
    assert!(
        (out[1] - dc).abs() <= 1e-12 * dc.abs(),
        "{} vs {dc}",
        out[1]
    );
}

#[test]
fn dynamic_calls_get_their_rules_at_run_time() {
    let src = "
fn square(x: f64) -> f64 { x * x }
fn apply(g: fn(f64) -> f64, x: f64) -> f64 { g(x) + g(2.0 * x) }
fn top(x: f64) -> f64 { apply(square, x) + apply(sin, x) }
";
    let m = irad::ir::surface::compile(src).expect("compiles");
    let top = m.by_name("top").unwrap();
    let registry = irad::rules::Registry::new();
    let c = irad::jit_reverse(&m, &[top], &registry).unwrap();
    let rev = c.func("top.rev").unwrap();
    let out = c
        .call(rev, &[Val::F64(0.7), Val::F64(1.0)], &RunOptions::default())
        .unwrap();
    let out = floats(&out);
    let x: f64 = 0.7;
    let value = x * x + 4.0 * x * x + x.sin() + (2.0 * x).sin();
    let dx = 2.0 * x + 8.0 * x + x.cos() + 2.0 * (2.0 * x).cos();
    assert!((out[0] - value).abs() < 1e-14, "{} vs {value}", out[0]);
    assert!((out[1] - dx).abs() < 1e-13, "{} vs {dx}", out[1]);
    // The rules of `square` and `sin` were derived while the code ran.
    assert!(c.module().len() > m.len() + 3);
}

#[test]
fn run_time_errors_are_the_interpreters() {
    let m = irad::ir::surface::compile("fn at(x: [f64], i: i64) -> f64 { x[i] }").unwrap();
    let f = m.by_name("at").unwrap();
    let c = irad::jit_primal(&m).unwrap();
    let args = [array(&[1.0, 2.0]), Val::I64(2)];
    let got = c.call(f, &args, &RunOptions::default()).unwrap_err();
    let want = irad::ir::interp::run(&m, f, &args, &RunOptions::default()).unwrap_err();
    let irad::CompiledError::Run(got) = got else {
        panic!("a run-time error, got {got:?}")
    };
    assert_eq!(got, want);
    assert_eq!(got.msg, "index 2 out of bounds for array of length 2");
}

#[test]
fn a_compiled_gradient_runs_many_times_with_the_interpreters_results() {
    let m = sum_module();
    let f = m.by_name("f").unwrap();
    let registry = irad::rules::Registry::new();
    let args = [array(&[0.3, -1.2, 2.5, 0.0, 7.0]), Val::F64(1.5)];
    let src = irad::source_from_bytes("sum".into(), Vec::new()).unwrap();
    let opts = irad::passes::forward::grad::GradOptions::default();
    for (mode, width) in [
        (irad::Mode::Reverse, 1),
        (irad::Mode::Forward, 1),
        (irad::Mode::Forward, 4),
    ] {
        let opts = irad::passes::forward::grad::GradOptions {
            lanes: irad::ir::Lanes::dense(width).expect("a dense width"),
            ..opts.clone()
        };
        let (want, _) = match mode {
            irad::Mode::Reverse => irad::grad_reverse(&src, &m, f, &args, &registry, &opts),
            irad::Mode::Forward => irad::grad_forward(&src, &m, f, &args, &registry, &opts),
        }
        .unwrap();
        let g = irad::jit_gradient(
            &m,
            &registry,
            &irad::GradRequest {
                mode,
                opts: opts.clone(),
                ..irad::GradRequest::new(f, &args)
            },
        )
        .unwrap();
        g.compile().unwrap();
        for _ in 0..3 {
            let got = g.run(&args, &RunOptions::default()).unwrap();
            assert_eq!(
                bits(&floats(&got.value)),
                bits(&floats(&want.value)),
                "{mode:?}"
            );
            for (a, b) in got.gradient.iter().zip(&want.gradient) {
                assert_eq!(
                    bits(&floats(a.as_ref().unwrap())),
                    bits(&floats(b.as_ref().unwrap())),
                    "{mode:?} width {width}"
                );
            }
        }
        let v = g.run_primal(&args, &RunOptions::default()).unwrap();
        assert_eq!(bits(&floats(&v)), bits(&floats(&want.value)));
    }
}

#[test]
fn modules_that_do_not_verify_are_refused_not_compiled() {
    // A condition of type f64: the parser accepts it, the verifier does not.
    let m = irad::ir::text::parse_module(
        "func @f(%x: f64) -> f64 {\n#0:\n  gotoifnot %x, #2\n#1:\n  return %x\n#2:\n  return %x\n}\n",
    )
    .expect("parses");
    assert!(irad::ir::verify::verify_module(&m).is_err());
    let f = m.by_name("f").unwrap();
    let err = irad::codegen::Jit::new(&m)
        .unwrap()
        .run(f, &[Val::F64(1.0)], &RunOptions::default())
        .unwrap_err();
    assert!(
        err.msg
            .starts_with("cannot compile a function that does not verify: "),
        "{err}"
    );
    assert_eq!(err.loc.func.as_deref(), Some("f"));
}

/// `g`'s typed call at `args` (slices and scalars as given) against its
/// boxed call, bit for bit: the value, every gradient, and the primal.
fn typed_matches_boxed(g: &irad::CompiledGradient, args: &[Val]) {
    use irad::{ArgRef, GradOut};
    let want = g.run(args, &RunOptions::default()).unwrap();
    let slices: Vec<Vec<f64>> = args
        .iter()
        .map(|a| match a {
            Val::Array(_) => floats(a),
            _ => Vec::new(),
        })
        .collect();
    let refs: Vec<ArgRef<'_>> = args
        .iter()
        .zip(&slices)
        .map(|(a, s)| match a {
            Val::F64(x) => ArgRef::F64(*x),
            Val::I64(n) => ArgRef::I64(*n),
            Val::Array(_) => ArgRef::Slice(s),
            other => panic!("not a typed argument: {other:?}"),
        })
        .collect();
    // NaN-filled outputs: every one must be written.
    let mut scalars = vec![f64::NAN; args.len()];
    let mut arrays: Vec<Vec<f64>> = slices.iter().map(|s| vec![f64::NAN; s.len()]).collect();
    let mut outs: Vec<GradOut<'_>> = args
        .iter()
        .zip(scalars.iter_mut().zip(arrays.iter_mut()))
        .zip(&want.gradient)
        .map(|((a, (s, v)), d)| match (a, d) {
            (_, None) => GradOut::Skip,
            (Val::F64(_), Some(_)) => GradOut::F64(s),
            (_, Some(_)) => GradOut::Slice(v),
        })
        .collect();
    let y = g.gradient_into(&refs, &mut outs).unwrap();
    drop(outs);
    assert_eq!(y.to_bits(), floats(&want.value)[0].to_bits());
    for (i, d) in want.gradient.iter().enumerate() {
        let Some(d) = d else { continue };
        let got = match &args[i] {
            Val::F64(_) => vec![scalars[i]],
            _ => arrays[i].clone(),
        };
        assert_eq!(bits(&got), bits(&floats(d)), "gradient {i}");
    }
    let v = g.value(&refs).unwrap();
    let p = g.run_primal(args, &RunOptions::default()).unwrap();
    assert_eq!(v.to_bits(), floats(&p)[0].to_bits());
}

fn compiled_gradient(
    src: &str,
    name: &str,
    mode: irad::Mode,
    args: &[Val],
) -> irad::CompiledGradient {
    let m = irad::ir::surface::compile(src).expect("compiles");
    let f = m.by_name(name).unwrap();
    let registry = irad::rules::Registry::new();
    let req = irad::GradRequest {
        mode,
        ..irad::GradRequest::new(f, args)
    };
    irad::jit_gradient(&m, &registry, &req).unwrap()
}

#[test]
fn typed_calls_give_the_boxed_results() {
    let programs: [(&str, &str, Vec<Val>); 5] = [
        (
            "fn f(x: f64, y: f64) -> f64 { x * y + sin(x) }",
            "f",
            vec![Val::F64(0.7), Val::F64(-2.5)],
        ),
        (
            "fn g(x: [f64], n: i64, a: f64) -> f64 {\n    let mut s = 0.0;\n    for i in 0..n { s = s + exp(a * x[i]) / (1.0 + x[i] * x[i]); }\n    s * a\n}",
            "g",
            vec![array(&[0.5, -1.0, 2.0, 3.5]), Val::I64(3), Val::F64(0.25)],
        ),
        (
            "fn dot(x: [f64], y: [f64]) -> f64 {\n    let mut s = 0.0;\n    for i in 0..len(x) { s = s + x[i] * y[i] * x[i]; }\n    log(1.0 + s * s)\n}",
            "dot",
            vec![array(&[1.0, 2.0, 3.0]), array(&[-0.5, 0.25, 4.0])],
        ),
        (
            "fn h(k: i64, x: f64) -> f64 { if k > 0 { x * x * x } else { cos(x) } }",
            "h",
            vec![Val::I64(1), Val::F64(1.3)],
        ),
        ("fn e(x: [f64]) -> f64 { 0.0 }", "e", vec![array(&[])]),
    ];
    for (src, name, args) in &programs {
        for mode in [irad::Mode::Reverse, irad::Mode::Forward] {
            let g = compiled_gradient(src, name, mode, args);
            typed_matches_boxed(&g, args);
            typed_matches_boxed(&g, args); // the second call reuses the context
        }
    }
    // The builder-made module of the other tests, with varying lengths.
    let m = sum_module();
    let f = m.by_name("f").unwrap();
    let registry = irad::rules::Registry::new();
    let args = [array(&[0.3, -1.2]), Val::F64(1.5)];
    let g = irad::jit_gradient(&m, &registry, &irad::GradRequest::new(f, &args)).unwrap();
    for n in [0, 1, 2, 7] {
        let xs: Vec<f64> = (0..n).map(|i| f64::from(i) * 0.7 - 1.0).collect();
        typed_matches_boxed(&g, &[array(&xs), Val::F64(-0.5)]);
    }
}

#[test]
fn typed_calls_report_errors() {
    use irad::{ArgRef, GradOut};
    let src = "fn at(x: [f64], i: i64) -> f64 { x[i] * x[0] }";
    let args = [array(&[1.0, 2.0]), Val::I64(2)];
    let g = compiled_gradient(src, "at", irad::Mode::Reverse, &args);
    let xs = [1.0, 2.0];
    let mut dx = [0.0; 2];
    // A run-time error: the boxed path's.
    let want = g.run(&args, &RunOptions::default()).unwrap_err();
    let got = g
        .gradient_into(
            &[ArgRef::Slice(&xs), ArgRef::I64(2)],
            &mut [GradOut::Slice(&mut dx), GradOut::Skip],
        )
        .unwrap_err();
    assert_eq!(got.msg, "index 2 out of bounds for array of length 2");
    assert_eq!(
        want.to_string(),
        irad::passes::forward::grad::GradError::Run(got).to_string()
    );
    // The next call is not disturbed.
    let y = g
        .gradient_into(
            &[ArgRef::Slice(&xs), ArgRef::I64(1)],
            &mut [GradOut::Slice(&mut dx), GradOut::Skip],
        )
        .unwrap();
    assert_eq!((y, dx), (2.0, [2.0, 1.0]));
    // Misuse: wrong kinds, counts, lengths, an i64's derivative.
    let mut d = 0.0;
    let mut short = [0.0; 1];
    let bad: [(&[ArgRef<'_>], &mut [GradOut<'_>]); 4] = [
        (
            &[ArgRef::F64(1.0), ArgRef::I64(0)],
            &mut [GradOut::Skip, GradOut::Skip],
        ),
        (&[ArgRef::Slice(&xs)], &mut [GradOut::Skip]),
        (
            &[ArgRef::Slice(&xs), ArgRef::I64(0)],
            &mut [GradOut::Slice(&mut short), GradOut::Skip],
        ),
        (
            &[ArgRef::Slice(&xs), ArgRef::I64(0)],
            &mut [GradOut::Skip, GradOut::F64(&mut d)],
        ),
    ];
    for (args, outs) in bad {
        let err = g.gradient_into(args, outs).unwrap_err();
        assert_eq!(err.loc.func.as_deref(), Some("at"), "{err}");
    }
    // A parameter a typed call cannot take.
    let t = compiled_gradient(
        "fn t(p: (f64, f64)) -> f64 { p.0 * p.1 }",
        "t",
        irad::Mode::Reverse,
        &[Val::Tuple(Rc::from(vec![Val::F64(1.0), Val::F64(2.0)]))],
    );
    let err = t.value(&[ArgRef::F64(1.0)]).unwrap_err();
    assert!(
        err.msg.contains("typed calls take f64, i64 and [f64]"),
        "{err}"
    );
}
