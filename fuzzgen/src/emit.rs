//! The `emit` target of the fuzz runner: object code called through the C
//! ABI agrees with the JIT. For each generated program, `irad::emit` writes
//! the object of its entry function and of its gradient (`NAME`,
//! `NAME_grad`, docs/codegen.md "The C ABI") with its C header; the objects
//! of a batch of programs, and a C file of small callers that include every
//! header, are linked by the system C compiler (`cc`) into one shared
//! library, loaded with `dlopen` and called in process. The value, the
//! arguments' arrays after the call, the gradient and the error (status
//! code and first line of `irad_error_message()`) must be the JIT's, bit for
//! bit (any NaN equals any NaN).
//!
//! The runtime library is the static `libirad_runtime.a` (what C users link,
//! [`static_runtime`] finds or builds it), linked once per run into a shared
//! library ([`Runtime::load`]) that every batch links against: one copy of
//! the runtime for the whole run, so batches load and unload in
//! milliseconds and a batch costs one `cc` call however many programs it
//! holds.
//!
//! Assumes a Unix system with `cc` on the path and objects in the format
//! `dlopen` loads (ELF). Guarantees: each program's result is its own
//! (a batch that fails to link is linked again one program at a time, so a
//! header that does not compile names its program); the files of a batch
//! are removed after it. A crash inside the object's code ends the process
//! (as one in the JIT would).

use crate::check::{Loaded, fresh, load, same};
use crate::generate::Program;
use irad::codegen::runtime::TrapKind;
use irad::ir::Type;
use irad::ir::interp::{ArrayData, ArrayRef, Val};
use irad::ir::types::Scalar;
use irad::passes::forward::grad::GradOptions;
use irad::{Backend, EmitRequest, Source};
use std::ffi::{CStr, CString, c_char, c_void};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the comparison of one program saw: whether the value and the
/// gradient ran (in both, alike) or failed (in both, with the same error).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The primal ran to a value.
    pub value_ran: bool,
    /// The gradient ran to a value.
    pub grad_ran: bool,
}

/// The shared runtime of a run: `libirad_runtime.a` linked into a shared
/// library and loaded, which every batch's library links against.
pub struct Runtime {
    so: PathBuf,
    handle: Lib,
    message: unsafe extern "C" fn() -> *const c_char,
}

// SAFETY: the runtime's functions are thread-safe (their state, the error
// text included, is per thread: docs/codegen.md, "The header"), and the
// handle is only read.
unsafe impl Send for Runtime {}
// SAFETY: as above.
unsafe impl Sync for Runtime {}

/// A library loaded with `dlopen`, closed when dropped.
struct Lib(*mut c_void);

impl Lib {
    fn open(path: &Path, global: bool) -> Result<Lib, String> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| format!("{} has a NUL byte", path.display()))?;
        let mode = libc::RTLD_NOW
            | if global {
                libc::RTLD_GLOBAL
            } else {
                libc::RTLD_LOCAL
            };
        // SAFETY: a valid C string; the library's initialisers are the C
        // compiler's and the Rust runtime's.
        let h = unsafe { libc::dlopen(c.as_ptr(), mode) };
        if h.is_null() {
            return Err(format!("dlopen {}: {}", path.display(), dl_error()));
        }
        Ok(Lib(h))
    }

    fn symbol(&self, name: &str) -> Result<*mut c_void, String> {
        let c = CString::new(name).map_err(|_| format!("symbol {name:?} has a NUL byte"))?;
        // SAFETY: a handle from dlopen and a valid C string.
        let p = unsafe { libc::dlsym(self.0, c.as_ptr()) };
        if p.is_null() {
            return Err(format!("no symbol {name}: {}", dl_error()));
        }
        Ok(p)
    }
}

impl Drop for Lib {
    fn drop(&mut self) {
        // SAFETY: a handle from dlopen, closed once; nothing of the library
        // is used after (the callers' function pointers die with the batch).
        unsafe { libc::dlclose(self.0) };
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a C string valid until the next call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// `libirad_runtime.a`: the file `IRAD_RUNTIME_LIB` names, or the one
/// `cargo build -p irad-runtime` builds (with this binary's profile) into
/// the target directory this binary lives in.
pub fn static_runtime() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("IRAD_RUNTIME_LIB") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("no path of this program: {e}"))?;
    // target/PROFILE/irad-fuzz, or target/PROFILE/deps/TEST for a test.
    let mut dir = exe.parent();
    if dir.is_some_and(|d| d.ends_with("deps")) {
        dir = dir.and_then(Path::parent);
    }
    let target = dir
        .and_then(Path::parent)
        .ok_or("cannot tell the target directory; set IRAD_RUNTIME_LIB")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "-p", "irad-runtime", "--message-format=json"])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd.output().map_err(|e| {
        format!("cannot run {cargo} to build the runtime ({e}); set IRAD_RUNTIME_LIB")
    })?;
    if !out.status.success() {
        return Err(format!(
            "cargo build -p irad-runtime failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // The artifact line of the runtime names its files; the static library
    // is the one ending in `.a`.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"compiler-artifact\"") && l.contains("irad_runtime"))
        .flat_map(|l| l.split('"'))
        .find(|s| s.ends_with("libirad_runtime.a"))
        .map(PathBuf::from)
        .ok_or_else(|| "cargo reported no libirad_runtime.a; set IRAD_RUNTIME_LIB".into())
}

impl Runtime {
    /// Links `static_lib` (every object of it) into `dir/libirad_runtime.so`
    /// and loads it.
    pub fn load(static_lib: &Path, dir: &Path) -> Result<Runtime, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let so = dir.join("libirad_runtime.so");
        let mut cc = Command::new("cc");
        cc.arg("-shared")
            .arg("-o")
            .arg(&so)
            .arg("-Wl,--whole-archive")
            .arg(static_lib)
            .args(["-Wl,--no-whole-archive", "-lm", "-lpthread", "-ldl"]);
        run_cc(cc)?;
        let handle = Lib::open(&so, true)?;
        let sym = handle.symbol("irad_error_message")?;
        // SAFETY: the runtime's `const char *irad_error_message(void)`.
        let message = unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *const c_char>(sym)
        };
        Ok(Runtime {
            so,
            handle,
            message,
        })
    }

    /// The error text of the last exported call on this thread.
    fn message(&self) -> String {
        let _ = &self.handle;
        // SAFETY: the runtime's function; the text is valid until the next
        // exported call on this thread, and copied at once.
        let p = unsafe { (self.message)() };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-null and NUL-terminated, as the header promises.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn run_cc(mut cmd: Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run cc ({e}): the emit target needs a C compiler"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// One C parameter of an exported function, as the C ABI passes it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum CArg {
    Double,
    Int64,
    Int32,
    PtrDouble,
    PtrInt64,
    PtrUint8,
}

impl CArg {
    /// How the caller in C reads the slot `k` for this parameter.
    fn read(self, k: usize) -> String {
        match self {
            CArg::Double => format!("s[{k}].d"),
            CArg::Int64 => format!("s[{k}].i"),
            CArg::Int32 => format!("(int32_t)s[{k}].i"),
            CArg::PtrDouble => format!("(double *)s[{k}].p"),
            CArg::PtrInt64 => format!("(int64_t *)s[{k}].p"),
            CArg::PtrUint8 => format!("(uint8_t *)s[{k}].p"),
        }
    }
}

/// The memory of one call: the slots (one 8-byte word per C parameter) and
/// the buffers they point into.
#[derive(Default)]
struct Call {
    kinds: Vec<CArg>,
    slots: Vec<u64>,
    /// Array arguments' elements (f64 bits, i64, or bytes for bools).
    arrays: Vec<Buffer>,
    /// Shadows of the differentiated `[f64]` arrays, depth first.
    shadows: Vec<Vec<f64>>,
    /// Receives the value (one f64: generated entries return f64).
    out: Box<f64>,
    /// Receives the gradients of the f64s outside arrays, in argument order.
    grads: Vec<f64>,
}

/// An array argument's elements as C sees them.
enum Buffer {
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<u8>),
}

impl Call {
    /// The primal's parameters for `args` of types `params` (docs/codegen.md,
    /// "Calling convention"): f64, i64 and bool scalars, tuples flattened,
    /// arrays as pointer and length. `None` for what the ABI refuses.
    fn params(&mut self, args: &[Val], params: &[Type]) -> Option<()> {
        for (a, t) in args.iter().zip(params) {
            self.param(a, t)?;
        }
        Some(())
    }

    fn param(&mut self, a: &Val, t: &Type) -> Option<()> {
        match (a, t) {
            (Val::F64(x), Type::F64) => self.push(CArg::Double, x.to_bits()),
            (Val::I64(n), Type::I64) => self.push(CArg::Int64, *n as u64),
            (Val::Bool(b), Type::Bool) => self.push(CArg::Int32, u64::from(*b)),
            (Val::Unit, Type::Unit) => {}
            (Val::Tuple(xs), Type::Tuple(ts)) => {
                for (x, t) in xs.iter().zip(ts.iter()) {
                    self.param(x, t)?;
                }
            }
            (Val::Array(arr), Type::Array(_)) => {
                let (buf, kind, len) = match &*arr.0.borrow() {
                    ArrayData::F64(xs) => (Buffer::F64(xs.clone()), CArg::PtrDouble, xs.len()),
                    ArrayData::I64(xs) => (Buffer::I64(xs.clone()), CArg::PtrInt64, xs.len()),
                    ArrayData::Bool(xs) => (
                        Buffer::Bool(xs.iter().map(|&b| u8::from(b)).collect()),
                        CArg::PtrUint8,
                        xs.len(),
                    ),
                    ArrayData::Sparse(_) => return None,
                };
                self.arrays.push(buf);
                let p = match self.arrays.last_mut()? {
                    Buffer::F64(v) => v.as_mut_ptr() as u64,
                    Buffer::I64(v) => v.as_mut_ptr() as u64,
                    Buffer::Bool(v) => v.as_mut_ptr() as u64,
                };
                self.push(kind, p);
                self.push(CArg::Int64, len as u64);
            }
            _ => return None,
        }
        Some(())
    }

    fn push(&mut self, kind: CArg, slot: u64) {
        self.kinds.push(kind);
        self.slots.push(slot);
    }

    /// The out-pointer of the value.
    fn push_out(&mut self) {
        let p = &mut *self.out as *mut f64 as u64;
        self.push(CArg::PtrDouble, p);
    }

    /// `NAME_grad`'s parameters after the primal's: a shadow per `[f64]`
    /// array (every argument is differentiated), the seed 1.0, the value's
    /// out-pointer, then an out-pointer per f64 outside arrays.
    fn grad_params(&mut self, args: &[Val], params: &[Type]) {
        let mut lens = Vec::new();
        let mut scalars = 0;
        for (a, t) in args.iter().zip(params) {
            count_leaves(a, t, &mut lens, &mut scalars);
        }
        self.shadows = lens.iter().map(|&n| vec![0.0; n]).collect();
        for k in 0..self.shadows.len() {
            let p = self.shadows[k].as_mut_ptr() as u64;
            self.push(CArg::PtrDouble, p);
        }
        self.push(CArg::Double, 1.0f64.to_bits());
        self.push_out();
        self.grads = vec![0.0; scalars];
        for k in 0..scalars {
            let p = &mut self.grads[k] as *mut f64 as u64;
            self.push(CArg::PtrDouble, p);
        }
    }

    /// The array arguments as the call left them, as interpreter values.
    fn arrays_after(&self) -> Vec<Val> {
        self.arrays
            .iter()
            .map(|b| {
                Val::Array(ArrayRef::new(match b {
                    Buffer::F64(v) => ArrayData::F64(v.clone()),
                    Buffer::I64(v) => ArrayData::I64(v.clone()),
                    Buffer::Bool(v) => ArrayData::Bool(v.iter().map(|&x| x != 0).collect()),
                }))
            })
            .collect()
    }

    /// The gradient's f64 leaves in argument order, depth first (an
    /// array's shadow in its place), as [`grad_leaves`] lists the JIT's.
    fn grad_leaves(&self, args: &[Val], params: &[Type]) -> Vec<f64> {
        let (mut shadows, mut scalars) = (self.shadows.iter(), self.grads.iter());
        let mut out = Vec::new();
        for (a, t) in args.iter().zip(params) {
            object_leaves(a, t, &mut shadows, &mut scalars, &mut out);
        }
        out
    }
}

/// Counts the `[f64]` arrays (their lengths) and the f64s outside arrays of
/// `a`, depth first.
fn count_leaves(a: &Val, t: &Type, lens: &mut Vec<usize>, scalars: &mut usize) {
    match (a, t) {
        (Val::F64(_), Type::F64) => *scalars += 1,
        (Val::Tuple(xs), Type::Tuple(ts)) => {
            for (x, t) in xs.iter().zip(ts.iter()) {
                count_leaves(x, t, lens, scalars);
            }
        }
        (Val::Array(arr), Type::Array(Scalar::F64)) => lens.push(arr.0.borrow().len()),
        _ => {}
    }
}

fn object_leaves<'a>(
    a: &Val,
    t: &Type,
    shadows: &mut impl Iterator<Item = &'a Vec<f64>>,
    scalars: &mut impl Iterator<Item = &'a f64>,
    out: &mut Vec<f64>,
) {
    match (a, t) {
        (Val::F64(_), Type::F64) => out.extend(scalars.next().copied()),
        (Val::Tuple(xs), Type::Tuple(ts)) => {
            for (x, t) in xs.iter().zip(ts.iter()) {
                object_leaves(x, t, shadows, scalars, out);
            }
        }
        (Val::Array(_), Type::Array(Scalar::F64)) => {
            out.extend(shadows.next().into_iter().flatten().copied());
        }
        _ => {}
    }
}

/// The f64 leaves of a gradient (of [`irad::Gradient::gradient`]), depth
/// first; units and arguments without a gradient add none.
fn grad_leaves(g: &[Option<Val>]) -> Vec<f64> {
    fn go(v: &Val, out: &mut Vec<f64>) {
        match v {
            Val::F64(x) => out.push(*x),
            Val::Tuple(xs) => xs.iter().for_each(|x| go(x, out)),
            Val::Array(arr) => {
                if let ArrayData::F64(xs) = &*arr.0.borrow() {
                    out.extend_from_slice(xs);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for v in g.iter().flatten() {
        go(v, &mut out);
    }
    out
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| same(&Val::F64(*x), &Val::F64(*y)))
}

/// The trap kind a run-time error's message describes (`kernels/src/trap.rs`,
/// the texts every backend prints), for the kinds generated programs can
/// meet; `None` for others.
fn kind_of_message(line: &str) -> Option<TrapKind> {
    let msg = line.split_once("error: ")?.1;
    let table: [(&str, TrapKind); 8] = [
        ("division by zero", TrapKind::DivZero),
        ("remainder by zero", TrapKind::RemZero),
        ("integer overflow in idiv", TrapKind::IdivOverflow),
        ("fptosi of ", TrapKind::Fptosi),
        ("negative array length ", TrapKind::NegLen),
        ("index ", TrapKind::Index),
        ("call depth limit of ", TrapKind::Depth),
        ("`", TrapKind::Bulk),
    ];
    table
        .iter()
        .find(|(prefix, _)| msg.starts_with(prefix))
        .map(|&(_, k)| k)
}

/// What the JIT gave for a program, and its object, before the call.
struct Prepared {
    seed: u64,
    name: String,
    program: Program,
    loaded: Loaded,
    /// The JIT's value (or the first line of its error) and the arrays
    /// after the call.
    value: Result<(Val, Vec<Val>), String>,
    /// The JIT's gradient (or the first line of its error).
    grad: Result<irad::Gradient, String>,
    object: irad::codegen::ObjectFile,
}

/// The first line of an error as the command line prints it.
fn first_line(e: &irad::Error, src: &Source) -> String {
    e.render(&[src]).lines().next().unwrap_or("").to_string()
}

/// The arrays among `args` (in tuples too), in order.
fn arrays_of(args: &[Val]) -> Vec<Val> {
    fn go(v: &Val, out: &mut Vec<Val>) {
        match v {
            Val::Array(_) => out.push(v.clone()),
            Val::Tuple(xs) => xs.iter().for_each(|x| go(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    args.iter().for_each(|a| go(a, &mut out));
    out
}

/// Loads `p` with its entry renamed `f{seed}` (so the objects of a batch
/// export different symbols), runs the JIT and writes the object.
fn prepare(seed: u64, p: &Program) -> Result<Prepared, String> {
    let name = format!("f{seed}");
    let mut program = p.clone();
    program.source = p
        .source
        .replacen(&format!("fn {}(", p.func), &format!("fn {name}("), 1);
    program.func = name.clone();
    let l = load(&program)?;
    let args = fresh(&l.args);
    let value = irad::run(
        &l.src,
        &l.module,
        &irad::RunRequest {
            backend: Backend::Jit,
            ..irad::RunRequest::new(l.func, &args)
        },
    )
    .map(|v| (v, arrays_of(&args)))
    .map_err(|e| first_line(&e, &l.src));
    let registry = irad::rules::Registry::new();
    let gopts = GradOptions {
        exec: Backend::Jit.exec(),
        ..GradOptions::default()
    };
    let grad = irad::grad_reverse(&l.src, &l.module, l.func, &l.args, &registry, &gopts)
        .map(|(g, _)| g)
        .map_err(|e| first_line(&e, &l.src));
    let header = format!("{name}.h");
    let req = EmitRequest {
        grad: true,
        ..EmitRequest::new(l.func, &header)
    };
    let object = irad::emit(&l.src, &l.module, &req).map_err(|e| {
        format!(
            "emit fails where the JIT {}: {}",
            if grad.is_ok() {
                "runs"
            } else {
                "fails at run time"
            },
            e.render(&[&l.src])
        )
    })?;
    Ok(Prepared {
        seed,
        name,
        program,
        loaded: l,
        value,
        grad,
        object,
    })
}

/// The C callers of a batch: one `fz_NAME` and one `fz_NAME_grad` per
/// program, each taking the parameters as 8-byte slots and calling the
/// exported function with them (so the C compiler checks the header's
/// prototypes against the slots' types).
fn callers(progs: &[(&Prepared, Vec<CArg>, Vec<CArg>)]) -> String {
    let mut c = String::from(
        "#include <stdint.h>\ntypedef union { double d; int64_t i; void *p; } fz_slot;\n",
    );
    for (p, _, _) in progs {
        let _ = writeln!(c, "#include \"{}.h\"", p.name);
    }
    for (p, primal, grad) in progs {
        for (suffix, kinds) in [("", primal), ("_grad", grad)] {
            let args: Vec<String> = kinds.iter().enumerate().map(|(k, a)| a.read(k)).collect();
            let _ = writeln!(
                c,
                "int32_t fz_{n}{suffix}(const fz_slot *s) {{ {call}; }}",
                n = p.name,
                call = if args.is_empty() {
                    format!("(void)s; return {}{suffix}()", p.name)
                } else {
                    format!("return {}{suffix}({})", p.name, args.join(", "))
                }
            );
        }
    }
    c
}

/// The call of a program's primal and of its gradient, laid out.
fn calls(p: &Prepared) -> Result<(Call, Call), String> {
    let params = p.loaded.module[p.loaded.func].param_types();
    let mut primal = Call::default();
    let mut grad = Call::default();
    primal
        .params(&p.loaded.args, &params)
        .and_then(|()| grad.params(&p.loaded.args, &params))
        .ok_or("an argument the C ABI cannot carry")?;
    primal.push_out();
    grad.grad_params(&p.loaded.args, &params);
    Ok((primal, grad))
}

/// Links the callers of `progs` with their objects and the runtime into
/// `dir/NAME.so`.
fn link(
    rt: &Runtime,
    dir: &Path,
    name: &str,
    progs: &[(&Prepared, Vec<CArg>, Vec<CArg>)],
) -> Result<PathBuf, String> {
    let c_file = dir.join(format!("{name}.c"));
    std::fs::write(&c_file, callers(progs)).map_err(|e| format!("{}: {e}", c_file.display()))?;
    let so = dir.join(format!("{name}.so"));
    let mut cc = Command::new("cc");
    cc.args([
        "-shared",
        "-fPIC",
        "-O0",
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Wconversion",
        "-Werror",
    ])
    .arg("-I")
    .arg(dir)
    .arg("-o")
    .arg(&so)
    .arg(&c_file);
    for (p, _, _) in progs {
        cc.arg(dir.join(format!("{}.o", p.name)));
    }
    cc.arg(&rt.so);
    run_cc(cc)?;
    Ok(so)
}

type Caller = unsafe extern "C" fn(*const u64) -> i32;

/// Calls `fz_{name}` of `lib` with the slots of `call`; the status and the
/// error text.
fn call(rt: &Runtime, lib: &Lib, name: &str, call: &Call) -> Result<(i32, String), String> {
    let sym = lib.symbol(&format!("fz_{name}"))?;
    // SAFETY: `fz_NAME` has this signature (`callers`); the slots point at
    // buffers of `call` that live through the call, of the lengths passed.
    let status = unsafe {
        let f = std::mem::transmute::<*mut c_void, Caller>(sym);
        f(call.slots.as_ptr())
    };
    Ok((
        status,
        if status == 0 {
            String::new()
        } else {
            rt.message()
        },
    ))
}

/// The status and message of a failed call against the JIT's error line.
fn same_error(what: &str, status: i32, msg: &str, jit: &str) -> Result<(), String> {
    let first = msg.lines().next().unwrap_or("");
    if first != jit {
        return Err(format!(
            "{what}: the JIT fails with\n  {jit}\nbut the object (status {status}) with\n  {first}"
        ));
    }
    if TrapKind::from_code(i64::from(status)).is_none() {
        return Err(format!(
            "{what}: status {status} is no error code ({first})"
        ));
    }
    match kind_of_message(jit) {
        Some(k) if k.code() != i64::from(status) => Err(format!(
            "{what}: status {status}, but the error ({first}) is {k:?} (code {})",
            k.code()
        )),
        _ => Ok(()),
    }
}

/// Calls the primal and the gradient of `p` in `lib` and compares them with
/// the JIT's.
fn compare(
    rt: &Runtime,
    lib: &Lib,
    p: &Prepared,
    primal: &Call,
    grad: &Call,
) -> Result<Outcome, String> {
    let params = p.loaded.module[p.loaded.func].param_types();
    let (status, msg) = call(rt, lib, &p.name, primal)?;
    match &p.value {
        Ok((v, arrays)) => {
            if status != 0 {
                return Err(format!(
                    "value: the JIT gives {v:?} but the object fails with status {status}: {msg}"
                ));
            }
            let got = Val::F64(*primal.out);
            if !same(v, &got) {
                return Err(format!("value: the JIT gives {v:?} but the object {got:?}"));
            }
            let after = primal.arrays_after();
            if !same(
                &Val::Tuple(arrays.clone().into()),
                &Val::Tuple(after.clone().into()),
            ) {
                return Err(format!(
                    "arrays after the call: the JIT leaves {arrays:?} but the object {after:?}"
                ));
            }
        }
        Err(jit) => {
            if status == 0 {
                return Err(format!(
                    "value: the JIT fails ({jit}) but the object gives {}",
                    primal.out
                ));
            }
            same_error("value", status, &msg, jit)?;
        }
    }
    let (status, msg) = call(rt, lib, &format!("{}_grad", p.name), grad)?;
    match &p.grad {
        Ok(g) => {
            if status != 0 {
                return Err(format!(
                    "gradient: the JIT runs but the object fails with status {status}: {msg}"
                ));
            }
            let got = Val::F64(*grad.out);
            if !same(&g.value, &got) {
                return Err(format!(
                    "gradient's value: the JIT gives {:?} but the object {got:?}",
                    g.value
                ));
            }
            let (want, have) = (
                grad_leaves(&g.gradient),
                grad.grad_leaves(&p.loaded.args, &params),
            );
            if !same_bits(&want, &have) {
                return Err(format!(
                    "gradient: the JIT gives {want:?} but the object {have:?}"
                ));
            }
            let after = grad.arrays_after();
            let before = arrays_of(&p.loaded.args);
            if !same(
                &Val::Tuple(before.clone().into()),
                &Val::Tuple(after.clone().into()),
            ) {
                return Err(format!(
                    "the gradient leaves the arrays {after:?}, not as they were: {before:?}"
                ));
            }
        }
        Err(jit) => {
            if status == 0 {
                return Err(format!(
                    "gradient: the JIT fails ({jit}) but the object runs"
                ));
            }
            same_error("gradient", status, &msg, jit)?;
        }
    }
    Ok(Outcome {
        value_ran: p.value.is_ok(),
        grad_ran: p.grad.is_ok(),
    })
}

/// Checks the programs of a batch (with their seeds) in `dir`, a folder of
/// its own that is removed after: one result per program, in order, each
/// `Err` holding the message and the program.
pub fn check_batch(
    rt: &Runtime,
    dir: &Path,
    programs: &[(u64, Program)],
) -> Vec<Result<Outcome, String>> {
    let mut results: Vec<Result<Outcome, String>> = Vec::with_capacity(programs.len());
    let mut ready: Vec<(usize, Prepared, Call, Call)> = Vec::new();
    let made = std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()));
    for (i, (seed, p)) in programs.iter().enumerate() {
        let prepared = made
            .clone()
            .and_then(|()| caught(|| prepare(*seed, p)))
            .and_then(|pr| {
                let path = dir.join(format!("{}.o", pr.name));
                std::fs::write(&path, &pr.object.object)
                    .and_then(|()| {
                        std::fs::write(dir.join(format!("{}.h", pr.name)), &pr.object.header)
                    })
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let (primal, grad) = calls(&pr)?;
                Ok((pr, primal, grad))
            });
        match prepared {
            Ok((pr, primal, grad)) => {
                results.push(Ok(Outcome::default()));
                ready.push((i, pr, primal, grad));
            }
            Err(e) => results.push(Err(e)),
        }
    }
    let batch: Vec<(&Prepared, Vec<CArg>, Vec<CArg>)> = ready
        .iter()
        .map(|(_, p, a, b)| (p, a.kinds.clone(), b.kinds.clone()))
        .collect();
    let open = |name: &str, progs: &[(&Prepared, Vec<CArg>, Vec<CArg>)]| {
        link(rt, dir, name, progs).and_then(|so| Lib::open(&so, false))
    };
    let first = programs.first().map_or(0, |p| p.0);
    // One library for the batch; if it does not link, one per program, so
    // that a header or an object that does not link names its program.
    let linked = match open(&format!("batch{first}"), &batch) {
        Ok(lib) => Linked::One(lib),
        Err(_) => Linked::Each(
            batch
                .iter()
                .map(|one| open(&format!("one_{}", one.0.name), std::slice::from_ref(one)))
                .collect(),
        ),
    };
    for (k, (i, p, primal, grad)) in ready.iter().enumerate() {
        let lib = match &linked {
            Linked::One(lib) => Ok(lib),
            Linked::Each(libs) => libs[k].as_ref().map_err(Clone::clone),
        };
        let res = lib.and_then(|lib| caught(|| compare(rt, lib, p, primal, grad)));
        results[*i] = res.map_err(|e| {
            format!(
                "{e}\n(seed {}, entry renamed {})\n\n--- program ---\n{}\n--- args ---\n{}\n",
                p.seed, p.name, p.program.source, p.program.args
            )
        });
    }
    drop(linked);
    let _ = std::fs::remove_dir_all(dir);
    results
}

/// `f()`, with a panic (inside irad) as an `Err`.
fn caught<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let text = p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        Err(format!("panic: {text}"))
    })
}

/// The libraries of a batch: one for all, or one per program.
enum Linked {
    One(Lib),
    Each(Vec<Result<Lib, String>>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_their_trap_kinds() {
        let line = |m: &str| format!("gen.irad:3:5: error: {m} (in @f, block #1, statement 2)");
        for (m, k) in [
            ("division by zero", TrapKind::DivZero),
            (
                "index 7 out of bounds for array of length 2",
                TrapKind::Index,
            ),
            ("fptosi of nan is out of the i64 range", TrapKind::Fptosi),
            ("call depth limit of 5 exceeded", TrapKind::Depth),
            ("`axpy`: output `y` is also an input", TrapKind::Bulk),
        ] {
            assert_eq!(kind_of_message(&line(m)), Some(k), "{m}");
        }
        assert_eq!(kind_of_message(&line("something else")), None);
        assert_eq!(kind_of_message("no error here"), None);
    }

    #[test]
    fn errors_must_agree_in_text_and_code() {
        let jit = "gen.irad:3:5: error: division by zero (in @f, block #1, statement 2)";
        let code = TrapKind::DivZero.code() as i32;
        let with_note = format!("{jit}\nnote: called in @g");
        assert_eq!(same_error("value", code, &with_note, jit), Ok(()));
        // Another text, another code, a code that is no error code.
        let other = "gen.irad:3:6: error: division by zero (in @f, block #1, statement 2)";
        assert!(same_error("value", code, other, jit).is_err());
        let index = TrapKind::Index.code() as i32;
        assert!(same_error("value", index, jit, jit).is_err());
        assert!(same_error("value", 99, jit, jit).is_err());
    }
}
