//! irad's exported functions defined in an embedder's own Cranelift module
//! (`irad::define_in_module`, docs/codegen.md "In the embedder's module"):
//! a JIT module the test builds, with a function of its own beside irad's,
//! the runtime's symbols registered; the C ABI functions called in process
//! give the interpreter's values and gradients bit for bit, and run-time
//! errors come back as the documented status codes.

use irad::codegen::cranelift_codegen::ir::{AbiParam, InstBuilder, types};
use irad::codegen::cranelift_codegen::settings::{self, Configurable};
use irad::codegen::cranelift_jit::{JITBuilder, JITModule};
use irad::codegen::cranelift_module::{Linkage, Module as _, default_libcall_names};
use irad::{Backend, EmitRequest, GradOptions, Source, Val};

/// A JIT module on this machine's ISA with the flag irad needs, and the
/// runtime's symbols.
fn jit_module() -> JITModule {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").expect("a flag");
    flags
        .set("enable_multi_ret_implicit_sret", "true")
        .expect("a flag");
    let isa = irad::codegen::cranelift_native::builder()
        .expect("a native ISA")
        .finish(settings::Flags::new(flags))
        .expect("an ISA");
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    for (name, address) in irad::codegen::runtime_symbols() {
        builder.symbol(name, address);
    }
    JITModule::new(builder)
}

/// The embedder's own function in the same module: `double twice(double)`.
fn define_twice(m: &mut JITModule) -> irad::codegen::cranelift_module::FuncId {
    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(types::F64));
    sig.returns.push(AbiParam::new(types::F64));
    let id = m
        .declare_function("twice", Linkage::Export, &sig)
        .expect("declared");
    let mut ctx = m.make_context();
    ctx.func.signature = sig;
    let mut fctx = irad::codegen::cranelift_frontend::FunctionBuilderContext::new();
    let mut b = irad::codegen::cranelift_frontend::FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    let x = b.block_params(block)[0];
    let y = b.ins().fadd(x, x);
    b.ins().return_(&[y]);
    b.seal_all_blocks();
    b.finalize(m.isa().frontend_config());
    m.define_function(id, &mut ctx).expect("defined");
    id
}

const PROGRAM: &str = "fn f(x: f64, y: f64) -> f64 { x * y + sin(x) }\n\
                       fn g(a: [f64], i: i64) -> f64 { a[i] * a[0] }\n";

/// The interpreter's value and gradient of `func` at `args`.
fn reference(src: &Source, m: &irad::ir::Module, func: &str, args: &[Val]) -> (f64, Vec<Val>) {
    let f = irad::find_function(src, m, func).expect("function");
    let registry = irad::rules::Registry::new();
    let opts = GradOptions {
        exec: Backend::Interp.exec(),
        ..GradOptions::default()
    };
    let (g, _) = irad::grad_reverse(src, m, f, args, &registry, &opts).expect("gradient");
    let Val::F64(v) = g.value else { panic!("f64") };
    (v, g.gradient.into_iter().flatten().collect())
}

type FGrad = unsafe extern "C" fn(f64, f64, f64, *mut f64, *mut f64, *mut f64) -> i32;
type GGrad = unsafe extern "C" fn(*mut f64, i64, i64, *mut f64, f64, *mut f64) -> i32;
type Twice = unsafe extern "C" fn(f64) -> f64;

#[test]
fn exports_defined_in_the_embedders_jit_module_run_in_process() {
    let src = Source::new("e.irad", PROGRAM);
    let module = irad::load(&src).expect("loads");
    let mut backend = jit_module();
    let twice = define_twice(&mut backend);
    let f = irad::find_function(&src, &module, "f").expect("f");
    let g = irad::find_function(&src, &module, "g").expect("g");
    let reqs = [
        EmitRequest {
            grad: true,
            ..EmitRequest::new(f, "e.h")
        },
        EmitRequest {
            grad: true,
            ..EmitRequest::new(g, "e.h")
        },
    ];
    let (mut backend, defined) = irad::define_in_module(backend, &src, &module, &reqs)
        .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    for name in ["f", "f_grad", "g", "g_grad"] {
        assert!(
            defined.header.contains(&format!("int32_t {name}(")),
            "{}",
            defined.header
        );
    }
    let names: Vec<&str> = defined.functions.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["f", "f_grad", "g", "g_grad"]);
    backend.finalize_definitions().expect("finalised");
    let address = |id| backend.get_finalized_function(id);
    let id = |name: &str| {
        defined
            .functions
            .iter()
            .find(|(n, _)| n == name)
            .expect("defined")
            .1
    };
    let (f_grad, g_grad) = (id("f_grad"), id("g_grad"));
    // SAFETY: the signatures are the C ABI the headers declare.
    let (f_grad, g_grad, twice): (FGrad, GGrad, Twice) = unsafe {
        (
            std::mem::transmute::<*const u8, FGrad>(address(f_grad)),
            std::mem::transmute::<*const u8, GGrad>(address(g_grad)),
            std::mem::transmute::<*const u8, Twice>(address(twice)),
        )
    };
    // SAFETY: plain f64 in and out.
    assert_eq!(unsafe { twice(1.25) }, 2.5);

    for (x, y) in [(0.5, 2.0), (-3.0, 0.25), (10.0, -7.5)] {
        let (want_v, want_g) = reference(&src, &module, "f", &[Val::F64(x), Val::F64(y)]);
        let (mut v, mut dx, mut dy) = (0.0, 0.0, 0.0);
        // SAFETY: valid out-pointers.
        let status = unsafe { f_grad(x, y, 1.0, &mut v, &mut dx, &mut dy) };
        assert_eq!(status, 0);
        assert_eq!(v.to_bits(), want_v.to_bits());
        assert_eq!(
            [Val::F64(dx), Val::F64(dy)].map(|d| format!("{d:?}")),
            [format!("{:?}", want_g[0]), format!("{:?}", want_g[1])]
        );
    }

    let mut a = [1.5, -2.0, 4.0];
    let arg = Val::f64_array(a.to_vec());
    let (want_v, want_g) = reference(&src, &module, "g", &[arg, Val::I64(2)]);
    let mut da = [0.0; 3];
    let mut v = 0.0;
    // SAFETY: a and da have 3 elements, as passed.
    let status = unsafe { g_grad(a.as_mut_ptr(), 3, 2, da.as_mut_ptr(), 1.0, &mut v) };
    assert_eq!(status, 0);
    assert_eq!(v.to_bits(), want_v.to_bits());
    assert_eq!(
        format!("{:?}", Val::f64_array(da.to_vec())),
        format!("{:?}", want_g[0])
    );
    // An index out of range: the status code of the C ABI (9), not a crash.
    // SAFETY: as above.
    let status = unsafe { g_grad(a.as_mut_ptr(), 3, 7, da.as_mut_ptr(), 1.0, &mut v) };
    assert_eq!(status, 9);
}

#[test]
fn a_module_without_the_flag_irad_needs_is_refused() {
    let flags = settings::builder();
    let isa = irad::codegen::cranelift_native::builder()
        .expect("a native ISA")
        .finish(settings::Flags::new(flags))
        .expect("an ISA");
    let backend = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let src = Source::new("e.irad", PROGRAM);
    let module = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &module, "f").expect("f");
    let err = irad::define_in_module(backend, &src, &module, &[EmitRequest::new(f, "f.h")])
        .err()
        .expect("refused");
    assert!(
        err.render(&[&src])
            .contains("enable_multi_ret_implicit_sret"),
        "{}",
        err.render(&[&src])
    );
}

#[test]
fn a_second_definition_in_one_module_is_refused_clearly() {
    let src = Source::new("e.irad", PROGRAM);
    let module = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &module, "f").expect("f");
    let req = [EmitRequest::new(f, "f.h")];
    let (backend, _) = irad::define_in_module(jit_module(), &src, &module, &req).expect("defined");
    let err = irad::define_in_module(backend, &src, &module, &req)
        .err()
        .expect("refused");
    let text = err.render(&[&src]);
    assert!(text.contains("already defines irad's functions"), "{text}");
}
