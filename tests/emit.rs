//! `irad emit` end to end: objects written by the binary, linked by the
//! system C compiler (`cc`) with the runtime's static library and the C
//! drivers in `tests/c/`, compute the interpreter's values and gradients bit
//! for bit, and report run-time errors with the documented status code and
//! the interpreter's located message. Also the command's own errors, the
//! worked example `examples/c/` built and run as its README says, and that
//! the static library defines every runtime symbol objects import, and that
//! exported derivatives fall back to their strong version where theirs come
//! out NaN.
//!
//! The static runtime is built with `cargo build -p irad-runtime` into the
//! target directory these tests run from. A missing C compiler fails the
//! tests that need one, with a message saying so (they never skip).

use irad::codegen::runtime as rt;
use irad::ir::interp::RunOptions;
use irad::ir::interp::value::{ArrayData, ArrayRef, Val};
use irad::passes::forward::grad::GradOptions;
use irad::{Backend, Source};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

#[path = "common/values.rs"]
mod values;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The target directory of this test run (`CARGO_TARGET_TMPDIR` is its `tmp`).
fn target_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).to_path_buf()
}

/// `libirad_runtime.a`, built once per test run; the path cargo reports.
fn runtime_lib() -> &'static Path {
    static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let lib = LIB.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(&cargo)
            .args(["build", "-p", "irad-runtime", "--message-format=json"])
            .arg("--target-dir")
            .arg(target_dir())
            .current_dir(ROOT)
            .output()
            .map_err(|e| format!("cannot run {cargo}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo build -p irad-runtime failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "irad_runtime")
            .flat_map(|m| {
                m["filenames"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
            })
            .filter_map(|f| f.as_str().map(PathBuf::from))
            .find(|f| f.extension().is_some_and(|e| e == "a"))
            .ok_or_else(|| format!("cargo reported no static library for irad-runtime:\n{stdout}"))
    });
    match lib {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

/// Fails with a clear message when there is no C compiler.
fn require_cc() {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "tests/emit.rs needs a C compiler called `cc` on PATH to link emitted objects \
         (install one, e.g. `apt-get install gcc`; .ci/run does so when it is missing)"
    );
}

/// A fresh directory for one test's files.
fn dir(test: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("emit")
        .join(test);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `irad emit FILE -f FUNC [extra] -o DIR/OUT.o`; returns the object's path.
fn emit(file: &str, func: &str, extra: &[&str], dir: &Path, out: &str) -> PathBuf {
    let obj = dir.join(format!("{out}.o"));
    let mut args = vec!["emit", file, "-f", func];
    args.extend_from_slice(extra);
    let obj_text = obj.display().to_string();
    args.extend(["-o", &obj_text]);
    let o = irad(&args);
    assert!(o.status.success(), "irad {args:?} failed:\n{}", stderr(&o));
    assert!(
        dir.join(format!("{out}.h")).exists(),
        "no header beside {obj_text}"
    );
    obj
}

/// Compiles the C driver `tests/c/{driver}` with the objects and the runtime
/// into `dir/{exe}`.
fn link(dir: &Path, driver: &str, objects: &[PathBuf], defines: &[&str], exe: &str) -> PathBuf {
    require_cc();
    let exe = dir.join(exe);
    let c_dir = Path::new(ROOT).join("tests").join("c");
    let o = Command::new("cc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-O1",
        ])
        .args(defines)
        .arg("-I")
        .arg(dir)
        .arg("-I")
        .arg(&c_dir)
        .arg(c_dir.join(driver))
        .args(objects)
        .arg(runtime_lib())
        .args(["-lm", "-lpthread", "-ldl", "-o"])
        .arg(&exe)
        .output()
        .expect("cc starts");
    assert!(
        o.status.success(),
        "cc failed for {driver}:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

/// Runs a linked driver; returns its standard output.
fn run(exe: &Path, args: &[String]) -> String {
    let o = Command::new(exe)
        .args(args)
        .output()
        .expect("driver starts");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{} {args:?} failed ({:?}):\n{out}{}",
        exe.display(),
        o.status,
        stderr(&o)
    );
    out
}

fn source(path: &str) -> (Source, irad::ir::Module) {
    let src = irad::read_source(Path::new(path)).expect("readable source");
    let module = irad::load(&src).expect("source loads");
    (src, module)
}

fn corpus(name: &str) -> String {
    format!("{ROOT}/tests/corpus/{name}")
}

/// The argument sets of a corpus program (`NAME.json`).
fn corpus_args(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(corpus(&format!("{name}.json"))).expect("corpus json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("corpus json parses");
    json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c["args"].as_str().expect("args").to_string())
        .collect()
}

/// Emits `func` of `file` with `flags` into `dir(test)`, links it with
/// `c/scalar2.c` (a function of f64s returning f64, and its gradient), and
/// checks the object's value and gradient at each of `args` against the
/// interpreter's, bit for bit; returns the executable.
fn scalar2_matches_interpreter(
    test: &str,
    file: &str,
    func: &str,
    flags: &[&str],
    args: &[&str],
) -> PathBuf {
    let d = dir(test);
    let obj = emit(file, func, flags, &d, func);
    let header = format!("-DIRAD_HEADER=\"{func}.h\"");
    let fdef = format!("-DIRAD_FUNC={func}");
    let exe = link(&d, "scalar2.c", &[obj], &[&header, &fdef], func);
    let (src, module) = source(file);
    for args in args {
        let vals = parse(&src, &module, func, args);
        let want = expected(&src, &module, func, &vals, None);
        let got = run(&exe, &argv(&vals));
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "{func}({args})");
    }
    exe
}

/// The driver's command-line form of argument values: numbers as text that
/// reads back to the same bits (`strtod`, `strtoll`), an array as its length
/// then its elements, a tuple as its components.
fn argv(vals: &[Val]) -> Vec<String> {
    fn go(v: &Val, out: &mut Vec<String>) {
        match v {
            Val::F64(x) => out.push(format!("{x:?}")),
            Val::I64(n) => out.push(n.to_string()),
            Val::Bool(b) => out.push(u8::from(*b).to_string()),
            Val::Tuple(vs) => vs.iter().for_each(|v| go(v, out)),
            Val::Array(a) => {
                out.push(a.0.borrow().len().to_string());
                match &*a.0.borrow() {
                    ArrayData::F64(xs) => out.extend(xs.iter().map(|x| format!("{x:?}"))),
                    ArrayData::I64(xs) => out.extend(xs.iter().map(i64::to_string)),
                    ArrayData::Bool(xs) => out.extend(xs.iter().map(|&b| u8::from(b).to_string())),
                    ArrayData::Sparse(_) => panic!("no command-line form for [sparse]"),
                }
            }
            _ => panic!("no command-line form for {}", v.kind()),
        }
    }
    let mut out = Vec::new();
    vals.iter().for_each(|v| go(v, &mut out));
    out
}

/// The f64s of a value in order, as the drivers print them.
fn bits(v: &Val, out: &mut Vec<String>) {
    match v {
        Val::F64(x) => out.push(format!("{:016x}", x.to_bits())),
        Val::Tuple(vs) => vs.iter().for_each(|v| bits(v, out)),
        Val::Array(a) => {
            if let ArrayData::F64(xs) = &*a.0.borrow() {
                out.extend(xs.iter().map(|x| format!("{:016x}", x.to_bits())));
            }
        }
        _ => {}
    }
}

fn line(label: &str, vals: &[&Val]) -> String {
    let mut out = Vec::new();
    vals.iter().for_each(|v| bits(v, &mut out));
    let mut s = label.to_string();
    for b in out {
        s.push(' ');
        s.push_str(&b);
    }
    s
}

/// What a driver prints for `func` at `args` by the interpreter: the value,
/// then the value and the gradient (of the arguments in `wrt`, default all).
fn expected(
    src: &Source,
    module: &irad::ir::Module,
    func: &str,
    args: &[Val],
    wrt: Option<Vec<usize>>,
) -> Vec<String> {
    let f = irad::find_function(src, module, func).expect("function");
    let value = irad::run(src, module, &irad::RunRequest::new(f, args)).expect("interpreter runs");
    let registry = irad::rules::Registry::new();
    let opts = GradOptions {
        tape_limit: None,
        checkpoints: Default::default(),
        lanes: irad::ir::Lanes::ONE,
        wrt,
        run: RunOptions::default(),
        exec: Backend::Interp.exec(),
        activity: true,
        ..GradOptions::default()
    };
    let (g, _) = irad::grad_reverse(src, module, f, args, &registry, &opts).expect("gradient");
    let grads: Vec<&Val> = g.gradient.iter().flatten().collect();
    vec![
        line("value", &[&value]),
        line("value", &[&g.value]),
        line("grad", &grads),
    ]
}

fn parse(src: &Source, module: &irad::ir::Module, func: &str, args: &str) -> Vec<Val> {
    let f = irad::find_function(src, module, func).expect("function");
    let text = Source {
        name: "<args>".into(),
        text: args.into(),
    };
    irad::parse_args(&text, module, f).expect("arguments parse")
}

#[test]
fn rosenbrock_value_and_gradient_match_the_interpreter_bit_for_bit() {
    let d = dir("rosenbrock");
    let file = corpus("rosenbrock.irad");
    let obj = emit(&file, "rosenbrock", &["--grad"], &d, "rosenbrock");
    let exe = link(&d, "rosenbrock.c", &[obj], &[], "rosenbrock");
    let (src, module) = source(&file);
    for args in corpus_args("rosenbrock") {
        let vals = parse(&src, &module, "rosenbrock", &args);
        let mut want = expected(&src, &module, "rosenbrock", &vals, None);
        want.push(line("x", &[&vals[0]]));
        let got = run(&exe, &argv(&vals));
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "rosenbrock({args})");
    }
}

#[test]
fn scalar_programs_match_the_interpreter_bit_for_bit() {
    // Straight-line primitives, static calls, and function values whose
    // rules the object builds ahead of time.
    for (name, func) in [
        ("scalar_prims", "prims"),
        ("static_calls", "chain"),
        ("higher_order", "hof"),
    ] {
        let d = dir(name);
        let file = corpus(&format!("{name}.irad"));
        let obj = emit(&file, func, &["--grad"], &d, func);
        let header = format!("-DIRAD_HEADER=\"{func}.h\"");
        let fdef = format!("-DIRAD_FUNC={func}");
        let exe = link(&d, "scalar2.c", &[obj], &[&header, &fdef], func);
        let (src, module) = source(&file);
        for args in corpus_args(name) {
            let vals = parse(&src, &module, func, &args);
            let want = expected(&src, &module, func, &vals, None);
            let got = run(&exe, &argv(&vals));
            assert_eq!(got.lines().collect::<Vec<_>>(), want, "{func}({args})");
        }
    }
}

#[test]
fn tuples_integers_wrt_and_two_objects_in_one_program() {
    let d = dir("tuples");
    let file = corpus("tuples.irad");
    let t = emit(&file, "tuples", &["--grad", "--wrt", "0"], &d, "tuples");
    let p = emit(&file, "polar", &[], &d, "polar");
    let exe = link(&d, "tuples.c", &[t, p], &[], "tuples");
    let (src, module) = source(&file);
    for args in corpus_args("tuples") {
        let vals = parse(&src, &module, "tuples", &args);
        let mut want = expected(&src, &module, "tuples", &vals, Some(vec![0]));
        let Val::Tuple(pt) = &vals[0] else {
            panic!("tuples takes a tuple first")
        };
        let polar = irad::find_function(&src, &module, "polar").expect("polar");
        let r =
            irad::run(&src, &module, &irad::RunRequest::new(polar, &pt[..])).expect("polar runs");
        want.push(line("polar", &[&r]));
        let got = run(&exe, &argv(&vals));
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "tuples({args})");
    }

    let d = dir("int_mixed");
    let file = corpus("int_mixed.irad");
    let obj = emit(&file, "int_mixed", &["--grad"], &d, "int_mixed");
    let exe = link(&d, "int_mixed.c", &[obj], &[], "int_mixed");
    let (src, module) = source(&file);
    for args in corpus_args("int_mixed") {
        let vals = parse(&src, &module, "int_mixed", &args);
        let want = expected(&src, &module, "int_mixed", &vals, None);
        let got = run(&exe, &argv(&vals));
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "int_mixed({args})");
    }
}

/// `irad emit --grad --tape-limit 1` checkpoints the loops of the object's
/// gradient (a snapshot every iteration): the object still gives the
/// interpreter's gradient without a limit, bit for bit, and leaves an array
/// the loops rewrite in place as it was.
#[test]
fn checkpointed_gradients_in_objects_match_the_interpreter_bit_for_bit() {
    let d = dir("int_mixed_limited");
    let file = corpus("int_mixed.irad");
    let obj = emit(
        &file,
        "int_mixed",
        &["--grad", "--tape-limit", "1"],
        &d,
        "int_mixed",
    );
    let exe = link(&d, "int_mixed.c", &[obj], &[], "int_mixed");
    let (src, module) = source(&file);
    for args in corpus_args("int_mixed") {
        let vals = parse(&src, &module, "int_mixed", &args);
        let want = expected(&src, &module, "int_mixed", &vals, None);
        let got = run(&exe, &argv(&vals));
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "int_mixed({args})");
    }

    let d = dir("smooth_limited");
    let file = format!("{ROOT}/tests/checkpoint/arrays.irad");
    let obj = emit(
        &file,
        "smooth",
        &["--grad", "--tape-limit", "1"],
        &d,
        "smooth",
    );
    let exe = link(&d, "smooth.c", &[obj], &[], "smooth");
    let (src, module) = source(&file);
    let args = "[0.5, -0.2, 0.3, 0.9], 0.3";
    // The primal writes x: each run gets its own copy of the arguments.
    let vals = || parse(&src, &module, "smooth", args);
    let f = irad::find_function(&src, &module, "smooth").expect("function");
    let value = irad::run(&src, &module, &irad::RunRequest::new(f, &vals())).expect("runs");
    let registry = irad::rules::Registry::new();
    let opts = GradOptions::default();
    let (g, _) = irad::grad_reverse(&src, &module, f, &vals(), &registry, &opts).expect("grad");
    let grads: Vec<&Val> = g.gradient.iter().flatten().collect();
    let want = vec![
        line("value", &[&value]),
        line("value", &[&g.value]),
        line("grad", &grads),
        line("x", &[&vals()[0]]),
    ];
    let got = run(&exe, &argv(&vals()));
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "smooth({args})");
}

/// A best iterate kept by reference (`tests/free_arrays/sharing.irad`,
/// whose header phis own the step's arrays together, docs/codegen.md
/// "Sharing webs"), in objects, with and without a tape limit: value and
/// gradient as in the interpreter, bit for bit.
#[test]
fn sharing_webs_in_objects_match_the_interpreter_bit_for_bit() {
    let file = format!("{ROOT}/tests/free_arrays/sharing.irad");
    let (src, module) = source(&file);
    for (name, limit) in [("best", None), ("best_limited", Some("1"))] {
        let d = dir(name);
        let mut extra = vec!["--grad"];
        extra.extend(limit.iter().flat_map(|l| ["--tape-limit", *l]));
        let obj = emit(&file, "best_after", &extra, &d, "best");
        let exe = link(&d, "best.c", &[obj], &[], "best");
        for args in [
            "[0.5, 0.2, 0.9], 7",
            "[0.1, 0.3, 0.35], 40",
            "[0.5, 0.2, 0.9], 0",
        ] {
            let vals = parse(&src, &module, "best_after", args);
            let want = expected(&src, &module, "best_after", &vals, None);
            let got = run(&exe, &argv(&vals));
            assert_eq!(
                got.lines().collect::<Vec<_>>(),
                want,
                "best_after({args}) under {limit:?}"
            );
        }
    }
}

/// The bools of a `[bool]` array as `tests/c/odd_bools.c` prints them.
fn bools_line(label: &str, v: &Val) -> String {
    let Val::Array(a) = v else {
        panic!("not an array: {}", v.kind())
    };
    let ArrayData::Bool(xs) = &*a.0.borrow() else {
        panic!("not a [bool] array")
    };
    let mut s = label.to_string();
    for &b in xs {
        s.push_str(if b { " 1" } else { " 0" });
    }
    s
}

/// A C caller's `[bool]` array may sit at an odd address, which compiled
/// code whose tapes are counted (under a tape limit) would read as a
/// popped array's tag: it wrote the array's restored elements a byte early
/// and counted a reference down in the caller's memory. The export passes
/// an aligned copy and copies it back: at every offset the object prints
/// what it prints at offset 0 (the interpreter's value, gradient and
/// arrays when the call succeeds; the index error, and the array as the
/// failing call left it, when not), and the bytes around the array stay.
#[test]
fn bool_arrays_at_odd_addresses_in_checkpointed_objects() {
    let d = dir("odd_bools");
    let file = format!("{ROOT}/tests/c/odd_bools.irad");
    let obj = emit(
        &file,
        "gate",
        &["--grad", "--tape-limit", "1"],
        &d,
        "odd_bools",
    );
    let exe = link(&d, "odd_bools.c", &[obj], &[], "odd_bools");
    let (src, module) = source(&file);
    let f = irad::find_function(&src, &module, "gate").expect("function");
    let cases = [
        "[0.5, 1.5, -0.3, 2.0, 0.1, 0.9], [false, true, false, true, true, false]",
        "[2.0, -1.5, 0.25], [true, true, false]",
        // m shorter than a: the loop fails at a[2] after writing m.
        "[0.5, 1.5, -0.3, 2.0], [true, false]",
    ];
    for args in cases {
        let vals = || parse(&src, &module, "gate", args);
        let ran = vals();
        let mut want = Vec::new();
        let ok = match irad::run(&src, &module, &irad::RunRequest::new(f, &ran)) {
            Ok(v) => {
                want.push(line("value", &[&v]));
                true
            }
            Err(_) => {
                want.push(format!("status {}", rt::TrapKind::Index.code()));
                false
            }
        };
        want.push(bools_line("m", &ran[1]));
        if ok {
            let entry = vals();
            let registry = irad::rules::Registry::new();
            let opts = GradOptions::default();
            let (g, _) =
                irad::grad_reverse(&src, &module, f, &entry, &registry, &opts).expect("gradient");
            let grads: Vec<&Val> = g.gradient.iter().flatten().collect();
            want.push(line("value", &[&g.value]));
            want.push(line("grad", &grads));
            want.push(bools_line("m", &vals()[1]));
        } else {
            want.push(format!("status {}", rt::TrapKind::Index.code()));
        }
        let at = |off: usize| {
            let mut argv = vec![off.to_string()];
            argv.extend(self::argv(&vals()));
            run(&exe, &argv)
        };
        let even = at(0);
        let lines: Vec<&str> = even.lines().collect();
        let (head, tail) = lines.split_at(lines.len() - 1);
        assert_eq!(tail, ["guard intact"], "gate({args}) at offset 0");
        if ok {
            assert_eq!(head, want, "gate({args}) at offset 0");
        } else {
            // The gradient's m is the failing run's, not compared.
            assert_eq!(&head[..3], &want[..3], "gate({args}) at offset 0");
        }
        for off in [1, 2, 3, 7, 15] {
            assert_eq!(at(off), even, "gate({args}) at offset {off}");
        }
    }
}

/// `irad emit --grad --checkpoint RULES` (docs/schedules.md): a `while` loop
/// the schedule checkpoints in stretches of 2, without a limit, gives the
/// interpreter's gradient without the schedule, bit for bit.
#[test]
fn objects_follow_the_checkpoint_schedule() {
    let file = format!("{ROOT}/tests/checkpoint/schedule.irad");
    let flags = ["--grad", "--checkpoint", "line 60 = 2"];
    let args = ["0.4, 1.1", "0.4, 2.0", "0.4, 5.0"];
    scalar2_matches_interpreter("spin_scheduled", &file, "spin", &flags, &args);
}

/// A loop that leaves through an edge not from its header (`||` and `&&`
/// in a `while` condition), checkpointed in an object under a 1-byte limit:
/// the interpreter's gradient without a limit, bit for bit, on runs that
/// leave by either operand of the `||`.
#[test]
fn checkpointed_loops_of_several_exits_in_objects_match_the_interpreter() {
    let file = format!("{ROOT}/tests/checkpoint/exits.irad");
    let flags = ["--grad", "--tape-limit", "1"];
    let args = ["0.5, 0.2", "4.0, 3.0", "2.9, 0.1", "4.0, 0.1"];
    scalar2_matches_interpreter("either_limited", &file, "either", &flags, &args);
}

#[test]
fn every_kind_of_parameter_and_result_and_scratch_shadows() {
    // Arrays of each element type, a bool, an array inside a tuple; a result
    // tuple of f64, bool and i64; with --wrt 2 the array `a` is not
    // differentiated and gets a scratch shadow inside the call.
    let file = format!("{ROOT}/tests/c/mixed.irad");
    let (src, module) = source(&file);
    let args = "[0.5, -1.25, 2.0], true, ([0.3, 0.7], 1.5), [2, -3, 4]";
    let vals = parse(&src, &module, "mixed", args);
    let flags: Vec<bool> = (0..3).map(|i| i % 2 == 0).collect();
    let stats = irad::find_function(&src, &module, "stats").expect("stats");
    let stats_args = [
        vals[0].clone(),
        Val::Array(ArrayRef::new(ArrayData::Bool(flags))),
    ];
    let r =
        irad::run(&src, &module, &irad::RunRequest::new(stats, &stats_args)).expect("stats runs");
    let Val::Tuple(r) = r else {
        panic!("stats returns a tuple")
    };
    let (Val::Bool(more), Val::I64(count)) = (&r[1], &r[2]) else {
        panic!("stats returns (f64, bool, i64)")
    };
    let Val::Tuple(t) = &vals[2] else {
        panic!("mixed takes a tuple third")
    };
    for (test, wrt, defines) in [
        ("mixed", None, &[][..]),
        ("mixed_wrt", Some(vec![2]), &["-DWRT_T"][..]),
    ] {
        let d = dir(test);
        let mut extra = vec!["--grad"];
        if wrt.is_some() {
            extra.extend(["--wrt", "2"]);
        }
        let objs = [
            emit(&file, "mixed", &extra, &d, "mixed"),
            emit(&file, "stats", &[], &d, "stats"),
        ];
        let exe = link(&d, "mixed.c", &objs, defines, "mixed");
        let mut want = expected(&src, &module, "mixed", &vals, wrt);
        want.push(line("a", &[&vals[0]]));
        want.push(line("u", &[&t[0]]));
        want.push(line("stats", &[&r[0]]));
        want.push(format!("{} {count}", u8::from(*more)));
        let got = run(&exe, &argv(&vals));
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "{test}({args})");
    }
}

#[test]
fn forward_rules_of_function_values_are_built_into_the_object() {
    let d = dir("frule");
    let file = format!("{ROOT}/tests/c/frule.ir");
    let obj = emit(&file, "f", &[], &d, "f");
    let exe = link(
        &d,
        "scalar1.c",
        &[obj],
        &["-DIRAD_HEADER=\"f.h\"", "-DIRAD_FUNC=f"],
        "f",
    );
    let (src, module) = source(&file);
    let f = irad::find_function(&src, &module, "f").expect("f");
    let registry = irad::rules::Registry::new();
    let mut fwd = irad::passes::forward::Forward::new(&registry);
    let mut m = module.clone();
    for x in [1.7, -0.3, 1e10] {
        let want = irad::ir::interp::interpreter_with_rules(&mut m, &mut fwd)
            .and_then(|mut i| i.run(f, &[Val::F64(x)], &RunOptions::default()))
            .expect("the interpreter runs @f");
        let got = run(&exe, &[format!("{x:?}")]);
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            [line("value", &[&want])],
            "f({x})"
        );
    }
}

/// One build of `tests/c/hvp.c`: its name, the function, the driver's
/// define, `--wrt`, and (arguments, direction) cases.
type HvpVariant<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Option<Vec<usize>>,
    &'a [(&'a str, &'a str)],
);

/// `irad emit --hvp`: `NAME_hvp` takes the direction, adds the gradient
/// and the product of array arguments into buffers and writes the others
/// through out-pointers; value, gradient and H·V equal `irad::hvp` in the
/// interpreter bit for bit, and the array argument is back in its state on
/// entry. Tuples and integers among the arguments, `--wrt` (the direction
/// and the outputs of the others left out), and calls through function
/// values (whose pieces and their forward rules the object holds ahead of
/// time).
#[test]
fn hessian_vector_products_match_the_interpreter_bit_for_bit() {
    let file = format!("{ROOT}/tests/c/hvp.irad");
    let (src, module) = source(&file);
    let registry = irad::rules::Registry::new();
    let mixed_cases = [
        (
            "1.5, (0.7, 3), [2.0, -1.0, 0.5], 1",
            "0.3, (-1.0, 0), [1.0, 0.5, -2.0], 0",
        ),
        (
            "-0.4, (2.5, -1), [0.25, 3.0], 0",
            "1.0, (0.0, 0), [0.0, 1.0], 0",
        ),
    ];
    let variants: [HvpVariant<'_>; 3] = [
        ("mixed", "mixed", "-DHVP_MIXED", None, &mixed_cases),
        (
            "mixed_wrt",
            "mixed",
            "-DHVP_MIXED_WRT",
            Some(vec![0, 2]),
            &mixed_cases,
        ),
        (
            "hof",
            "hof",
            "-DHVP_HOF",
            None,
            &[("0.7, 1.3", "1.0, -0.5"), ("-2.0, 0.1", "0.0, 1.0")],
        ),
    ];
    for (variant, func, define, wrt, cases) in variants {
        let d = dir(&format!("hvp_{variant}"));
        let mut extra = vec!["--hvp"];
        if wrt.is_some() {
            extra.extend(["--wrt", "0,2"]);
        }
        let obj = emit(&file, func, &extra, &d, "hvp_out");
        let header = std::fs::read_to_string(d.join("hvp_out.h")).expect("header");
        assert!(header.contains(&format!("int32_t {func}_hvp(")), "{header}");
        let exe = link(&d, "hvp.c", &[obj], &[define], variant);
        let f = irad::find_function(&src, &module, func).expect("function");
        for &(args, direction) in cases {
            let vals = parse(&src, &module, func, args);
            let t = irad::parse_tangent(&Source::new("<t>", direction), &module, f, &vals)
                .expect("direction");
            let req = irad::GradRequest {
                opts: GradOptions {
                    wrt: wrt.clone(),
                    exec: Backend::Interp.exec(),
                    ..GradOptions::default()
                },
                ..irad::GradRequest::new(f, &vals)
            };
            let (h, _) = irad::hvp(&src, &module, &registry, &req, &t).expect("hvp");
            // The driver's arguments: the function's, then the direction's
            // entries of the differentiated arguments (f64s outside arrays
            // in order, then the array's).
            let mut cmd = argv(&vals);
            let (mut scalars, mut arrays) = (Vec::new(), Vec::new());
            for (i, dv) in t.iter().enumerate() {
                if wrt.as_ref().is_some_and(|w| !w.contains(&i)) {
                    continue;
                }
                match dv {
                    Val::F64(x) => scalars.push(format!("{x:?}")),
                    Val::Tuple(xs) => {
                        if let Some(Val::F64(x)) = xs.first() {
                            scalars.push(format!("{x:?}"));
                        }
                    }
                    Val::Array(a) => {
                        if let ArrayData::F64(xs) = &*a.0.borrow() {
                            arrays.extend(xs.iter().map(|x| format!("{x:?}")));
                        }
                    }
                    _ => {}
                }
            }
            cmd.extend(scalars);
            cmd.extend(arrays);
            let split = |g: &[Option<Val>]| -> (Vec<Val>, Vec<Val>) {
                let (mut s, mut a) = (Vec::new(), Vec::new());
                for v in g.iter().flatten() {
                    match v {
                        Val::Array(_) => a.push(v.clone()),
                        _ => s.push(v.clone()),
                    }
                }
                (s, a)
            };
            let (gs, ga) = split(&h.gradient);
            let (hs, ha) = split(&h.hvp);
            let mut want = vec![line("value", &[&h.value]), line("grad", &refs_of(&gs))];
            if func == "mixed" {
                want.push(line("grad_y", &refs_of(&ga)));
                want.push(line("hvp", &refs_of(&hs)));
                want.push(line("hvp_y", &refs_of(&ha)));
                want.push(line("y", &[&vals[2]]));
            } else {
                want.push(line("hvp", &refs_of(&hs)));
            }
            let got = run(&exe, &cmd);
            assert_eq!(
                got.lines().collect::<Vec<_>>(),
                want,
                "{variant}({args}) along ({direction})"
            );
        }
    }
    // A function that does not return f64 is refused, located.
    let d = dir("hvp_refused");
    let src_file = d.join("pair.irad");
    std::fs::write(&src_file, "fn pair(x: f64) -> (f64, f64) { (x, x) }\n").expect("write");
    let out = d.join("pair.o");
    let o = irad(&[
        "emit",
        &src_file.display().to_string(),
        "-f",
        "pair",
        "--hvp",
        "-o",
        &out.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "pair.irad:1:1: error: @pair returns (f64, f64): `--hvp` needs a function returning f64"
        ),
        "{}",
        stderr(&o)
    );
}

/// Every corpus program (all return f64) is emitted with `--hvp` (and
/// `--grad`): the object is written and the header declares `NAME_hvp`
/// with one direction parameter per f64 of the arguments outside arrays and
/// per `[f64]` array. (The programs
/// of `tests/c/hvp.irad` are called from C above.)
#[test]
fn every_corpus_program_emits_its_hessian_vector_product() {
    let d = dir("hvp_corpus");
    let mut emitted = 0;
    for entry in std::fs::read_dir(format!("{ROOT}/tests/corpus")).expect("corpus") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("json")).expect("json");
        let func = json["function"].as_str().expect("function");
        for file in [json["file"].as_str(), json["ir_file"].as_str()]
            .into_iter()
            .flatten()
        {
            let out = format!("{}_{}", func, file.replace('.', "_"));
            emit(&corpus(file), func, &["--hvp", "--grad"], &d, &out);
            let header = std::fs::read_to_string(d.join(format!("{out}.h"))).expect("header");
            let sym = func.replace('.', "_");
            let decl = header
                .lines()
                .find(|l| l.starts_with(&format!("int32_t {sym}_hvp(")))
                .unwrap_or_else(|| panic!("no {sym}_hvp in\n{header}"));
            let (src, module) = source(&corpus(file));
            let f = irad::find_function(&src, &module, func).expect("function");
            let scalars: usize = module[f]
                .param_types()
                .iter()
                .map(irad::ir::Type::cotangent_leaves)
                .sum();
            assert_eq!(
                decl.matches("_dir").count(),
                scalars
                    + module[f]
                        .param_types()
                        .iter()
                        .map(irad::ir::Type::shadow_leaves)
                        .sum::<usize>(),
                "{file}: {decl}"
            );
            emitted += 1;
        }
    }
    assert!(emitted >= 15, "only {emitted} corpus programs emitted");
}

/// References to the values of a list, for [`line`].
fn refs_of(v: &[Val]) -> Vec<&Val> {
    v.iter().collect()
}

/// The lines of the interpreter's error as the command line renders it that
/// the C error text also has: the located first line and the call notes
/// (the C text has no source snippet).
fn interp_error_lines(err: &irad::Error, src: &Source) -> Vec<String> {
    err.render(&[src])
        .lines()
        .filter(|l| l.starts_with(&src.name) || l.starts_with("note:"))
        .map(String::from)
        .collect()
}

#[test]
fn run_time_errors_return_their_code_and_the_interpreters_message() {
    let d = dir("errors");
    let file = format!("{ROOT}/tests/c/errors.irad");
    let objs = vec![
        emit(&file, "pick", &["--grad"], &d, "pick"),
        emit(&file, "ratio", &[], &d, "ratio"),
        emit(&file, "deep", &[], &d, "deep"),
        emit(&file, "ratio_twice", &[], &d, "ratio_twice"),
        emit(&file, "chain", &["--grad"], &d, "chain"),
    ];
    let exe = link(&d, "errors.c", &objs, &[], "errors");
    let (src, module) = source(&file);
    let case = |name: &str| -> (i64, Vec<String>) {
        let out = run(&exe, &[name.to_string()]);
        let mut lines = out.lines();
        let status = lines
            .next()
            .and_then(|l| l.strip_prefix("status "))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {out}"));
        (status, lines.map(String::from).collect())
    };
    let interp = |func: &str, args: &str, max_depth: usize| {
        let f = irad::find_function(&src, &module, func).expect("function");
        let vals = parse(&src, &module, func, args);
        let opts = RunOptions {
            max_depth,
            ..RunOptions::default()
        };
        let err = irad::run(
            &src,
            &module,
            &irad::RunRequest {
                opts: opts.clone(),
                ..irad::RunRequest::new(f, &vals)
            },
        )
        .expect_err("the interpreter fails too");
        interp_error_lines(&err, &src)
    };
    let messages = |lines: &[String]| -> Vec<String> {
        lines.iter().filter(|l| !l.is_empty()).cloned().collect()
    };

    let (status, text) = case("pick");
    assert_eq!(status, rt::TrapKind::Index.code());
    assert_eq!(
        messages(&text),
        interp("pick", "[1.0, 2.0, 3.0], 5", 100_000)
    );

    let (status, text) = case("ratio");
    assert_eq!(status, rt::TrapKind::DivZero.code());
    assert_eq!(messages(&text), interp("ratio", "7, 0", 100_000));

    // In a callee inlined by code generation: the same text, a note for
    // the inlined call included.
    let (status, text) = case("ratio_twice");
    assert_eq!(status, rt::TrapKind::DivZero.code());
    let want = interp("ratio_twice", "7, 0", 100_000);
    assert!(want.len() == 2 && want[1].starts_with("note:"), "{want:?}");
    assert_eq!(messages(&text), want);

    let (status, text) = case("deep");
    assert_eq!(status, rt::TrapKind::Depth.code());
    let want = interp("deep", "100", 50);
    assert!(want.len() > 2, "{want:?}");
    assert_eq!(messages(&text), want);

    // The reverse pieces fail where the primal does.
    let (status, text) = case("pick_grad");
    assert_eq!(status, rt::TrapKind::Index.code());
    let f = irad::find_function(&src, &module, "pick").expect("pick");
    let vals = parse(&src, &module, "pick", "[1.0, 2.0, 3.0], 5");
    let opts = GradOptions {
        tape_limit: None,
        checkpoints: Default::default(),
        lanes: irad::ir::Lanes::ONE,
        wrt: None,
        run: RunOptions::default(),
        exec: Backend::Interp.exec(),
        activity: true,
        ..GradOptions::default()
    };
    let registry = irad::rules::Registry::new();
    let err = irad::grad_reverse(&src, &module, f, &vals, &registry, &opts)
        .expect_err("the interpreter fails too");
    // The interpreter runs the pieces without `@pick.rev`, whose call the C
    // text adds as a note: compare the located line.
    assert_eq!(messages(&text)[..1], interp_error_lines(&err, &src)[..1]);
    // Both name the derived function for the user (docs/cli.md).
    assert!(
        text[0].contains("(in the gradient of `pick` (@pick.rev.fwd), block #"),
        "{text:?}"
    );

    let (status, text) = case("neg_len");
    assert_eq!(status, rt::TrapKind::BadLength.code());
    assert_eq!(
        messages(&text),
        [format!(
            "{file}:2:1: error: array argument 0 has negative length -1 (in @pick)"
        )]
    );

    let (status, text) = case("stack");
    assert_eq!(status, rt::TrapKind::Stack.code());
    assert!(
        text[0].contains("error: native stack exhausted"),
        "{text:?}"
    );

    // A success after failures: the value, and an empty error text.
    let (status, text) = case("pick_ok");
    assert_eq!(status, 0);
    assert_eq!(text[0], line("value", &[&Val::F64(4.0)]));
    assert_eq!(messages(&text[1..]), Vec::<String>::new());

    let (status, _) = case("deep_ok");
    assert_eq!(status, 0);

    // The default stack budget is measured from the thread's stack (issue
    // 27, finding 4: a fixed 1 MiB stopped gradients short of depth 10 000).
    let (status, text) = case("chain_grad_deep");
    assert_eq!(status, 0, "{text:?}");
    let (status, text) = case("chain_grad_small_thread");
    assert_eq!(status, rt::TrapKind::Stack.code(), "{text:?}");
    assert!(text[0].contains("native stack exhausted"), "{text:?}");
}

#[test]
fn bulk_primitives_compute_and_fail_as_in_the_interpreter() {
    let d = dir("bulk");
    let file = format!("{ROOT}/tests/c/bulk.irad");
    let obj = emit(&file, "mm", &[], &d, "mm");
    let exe = link(&d, "bulk.c", &[obj], &[], "mm");
    let (src, module) = source(&file);
    let f = irad::find_function(&src, &module, "mm").expect("mm");
    for args in [
        "[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.5, -1.0, 1e16, 3.0, 0.25, -2.0], 2, 3, 2, [9.0, 9.0, 9.0, 9.0]",
        "[0.1, 0.2, 0.3], [1e16, 1.0, -1e16], 1, 3, 1, [0.0]",
        "[], [], 0, 0, 0, []",
        "[], [], 2, 0, 2, [5.0, 5.0, 5.0, 5.0]",
        "[1.0, 2.0], [], 2, 1, 0, []",
        // Shapes that do not fit: IRAD_ERR_BULK and the interpreter's text.
        "[1.0, 2.0, 3.0], [1.0, 2.0], 2, 1, 2, [0.0, 0.0, 0.0, 0.0]",
        "[1.0], [1.0], 1, 1, 1, [0.0, 0.0]",
        "[], [], 0, -1, 0, []",
        "[], [], 4294967296, 4294967296, 0, []",
    ] {
        let vals = parse(&src, &module, "mm", args);
        let out = run(&exe, &argv(&vals));
        let mut lines = out.lines().map(String::from);
        let status = lines.next().unwrap_or_default();
        let rest: Vec<String> = lines.filter(|l| !l.is_empty()).collect();
        match irad::run(&src, &module, &irad::RunRequest::new(f, &vals)) {
            Ok(value) => {
                assert_eq!(status, "status 0", "mm({args}): {out}");
                assert_eq!(
                    rest,
                    [line("value", &[&value]), line("c", &[&vals[5]])],
                    "mm({args})"
                );
            }
            Err(err) => {
                assert_eq!(
                    status,
                    format!("status {}", rt::TrapKind::Bulk.code()),
                    "mm({args}): {out}"
                );
                assert_eq!(rest, interp_error_lines(&err, &src), "mm({args})");
            }
        }
    }
}

#[test]
fn the_header_compiles_on_its_own_and_declares_the_runtime() {
    let d = dir("header");
    emit(&corpus("tuples.irad"), "tuples", &["--grad"], &d, "tuples");
    let h = std::fs::read_to_string(d.join("tuples.h")).expect("header");
    for needle in [
        "#ifndef IRAD_TUPLES_H",
        "#include <stdint.h>",
        "const char *irad_error_message(void);",
        "#define IRAD_ERR_INDEX          9",
        "int32_t tuples(double p_0, double p_1, double th, int64_t k, double *out);",
        "int32_t tuples_grad(double p_0, double p_1, double th, int64_t k, double seed, double *out, double *p_0_grad, double *p_1_grad, double *th_grad);",
    ] {
        assert!(h.contains(needle), "{needle} not in\n{h}");
    }
    require_cc();
    let o = Command::new("cc")
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
            "-x",
            "c",
        ])
        .arg(d.join("tuples.h"))
        .output()
        .expect("cc starts");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Every runtime function the code generator may import ([`rt::RtSym`])
/// is defined by the static library objects link with, under its name.
#[test]
fn the_static_runtime_defines_every_symbol_compiled_code_imports() {
    let o = Command::new("nm")
        .args(["--defined-only", "--format=posix"])
        .arg(runtime_lib())
        .output()
        .expect("nm starts (binutils)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    // `name type value size`, text symbols `T`; Mach-O prefixes an `_`.
    let defined: std::collections::HashSet<&str> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?;
            (f.next()? == "T").then(|| name.strip_prefix('_').unwrap_or(name))
        })
        .collect();
    for sym in rt::RtSym::ALL {
        assert!(
            defined.contains(sym.name()),
            "{} is not defined by {}",
            sym.name(),
            runtime_lib().display()
        );
    }
}

#[test]
fn emit_refuses_what_the_c_abi_cannot_carry_with_located_errors() {
    let d = dir("refusals");
    let out = d.join("x.o").display().to_string();
    let hof = corpus("higher_order.irad");
    let o = irad(&["emit", &hof, "-f", "apply", "-o", &out]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(&format!(
            "{hof}:1:1: error: cannot export @apply: argument 0 has type fn(f64) -> f64, and function values cannot cross the C ABI (in @apply)"
        )),
        "{}",
        stderr(&o)
    );

    let arr = d.join("arr.irad");
    std::fs::write(&arr, "fn twice(x: [f64]) -> [f64] {\n    x\n}\n").expect("write");
    let arr = arr.display().to_string();
    let o = irad(&["emit", &arr, "-f", "twice", "-o", &out]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("error: cannot export @twice: it returns [f64], and arrays cannot be returned through the C ABI"),
        "{}",
        stderr(&o)
    );

    let tuples = corpus("tuples.irad");
    let o = irad(&[
        "emit", &tuples, "-f", "tuples", "--grad", "--wrt", "2", "-o", &out,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("error: --wrt 2: argument 2 of @tuples has type i64, which has no tangent"),
        "{}",
        stderr(&o)
    );
    let o = irad(&[
        "emit", &tuples, "-f", "tuples", "--grad", "--wrt", "7", "-o", &out,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("error: --wrt 7: @tuples has 3 arguments"),
        "{}",
        stderr(&o)
    );

    // Usage errors exit 2: --wrt without --grad, no -o, an unknown function
    // is a user error (1).
    let o = irad(&["emit", &tuples, "-f", "tuples", "--wrt", "0", "-o", &out]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = irad(&["emit", &tuples, "-f", "tuples"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = irad(&["emit", &tuples, "-f", "nope", "-o", &out]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!Path::new(&out).exists());
}

/// The fenced block of `text` that starts with the line ` ```text`: what
/// examples/c/README.md says the program prints.
fn text_block(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| *l != "```text").skip(1);
    let mut out = String::new();
    for l in lines.by_ref().take_while(|l| *l != "```") {
        out.push_str(l);
        out.push('\n');
    }
    out
}

#[test]
fn c_example_builds_runs_and_agrees_with_irad_grad() {
    // examples/c/README.md's steps, from the repository's root.
    let d = dir("c_example");
    let obj = d.join("loss.o");
    let o = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args([
            "emit",
            "examples/c/loss.irad",
            "-f",
            "loss",
            "--grad",
            "--wrt",
            "0",
            "-o",
        ])
        .arg(&obj)
        .current_dir(ROOT)
        .output()
        .expect("irad starts");
    assert!(o.status.success(), "irad emit failed:\n{}", stderr(&o));
    require_cc();
    let exe = d.join("loss");
    let o = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(&d)
        .arg(Path::new(ROOT).join("examples/c/main.c"))
        .arg(&obj)
        .arg(runtime_lib())
        .args(["-lm", "-lpthread", "-ldl", "-o"])
        .arg(&exe)
        .output()
        .expect("cc starts");
    assert!(
        o.status.success(),
        "cc failed for examples/c/main.c:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = run(&exe, &[]);
    let readme =
        std::fs::read_to_string(Path::new(ROOT).join("examples/c/README.md")).expect("README");
    assert_eq!(
        out,
        text_block(&readme),
        "examples/c/README.md shows another output"
    );

    // The C program's numbers are irad grad's, bit for bit.
    let o = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args([
            "grad",
            "examples/c/loss.irad",
            "-f",
            "loss",
            "--wrt",
            "0",
            "--json",
        ])
        .args(["--args", "[0.5, -0.25, 1.0], [1.0, 2.0, 3.0], 1.0"])
        .current_dir(ROOT)
        .output()
        .expect("irad starts");
    assert!(o.status.success(), "irad grad failed:\n{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let number = |s: &str| s.parse::<f64>().expect("a number");
    let field = |label: &str| -> Vec<f64> {
        out.lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no `{label}` line in:\n{out}"))
            .split_whitespace()
            .map(number)
            .collect()
    };
    assert_eq!(field("value: "), [json["value"].as_f64().expect("value")]);
    let want: Vec<f64> = json["gradient"][0]
        .as_array()
        .expect("gradient of w")
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    assert_eq!(field("gradient: "), want);
}

/// A function whose rules are written in the language (`jvp`/`vjp` in its
/// header): the object's gradient calls the vjp as the interpreter does, bit
/// for bit, and that is the rule's derivative (3 at x = 5, where clip's body
/// has 0), not the body's.
#[test]
fn rules_written_in_the_language_reach_objects() {
    let file = format!("{ROOT}/tests/lang_rules/clip.irad");
    let args = ["5.0, 0.5", "0.25, -0.5", "-7.5, 2.0"];
    let exe = scalar2_matches_interpreter("lang_rules", &file, "st", &["--grad"], &args);
    let (src, module) = source(&file);
    let vals = parse(&src, &module, "st", "5.0, 0.5");
    let got = run(&exe, &argv(&vals));
    let grad = got.lines().last().expect("a gradient line");
    let three = line("grad", &[&Val::F64(3.0), &Val::F64(1.0)]);
    assert_eq!(grad, three);
}

/// The loop of issue 27, finding 6 as objects (`tests/c/temporaries.irad`):
/// a 10 000-element temporary per iteration, 20 000 iterations (1.6 GB of
/// arrays made), under a 300 MB address-space limit; and `c`, which carries
/// a buffer remade every iteration through its loop's phi (as many arrays). Objects free every
/// array at the end of each exported call; compiled code frees each
/// temporary once no value can reach it, so the call stays far below the
/// limit. The values are the file's, computed by hand.
#[test]
fn temporaries_of_a_loop_run_in_bounded_memory_in_objects() {
    let d = dir("temporaries");
    let file = format!("{ROOT}/tests/c/temporaries.irad");
    let f = emit(&file, "f", &[], &d, "temporaries_f");
    let r = emit(&file, "r", &["--grad"], &d, "temporaries_r");
    let c = emit(&file, "c", &[], &d, "temporaries_c");
    let exe = link(&d, "temporaries.c", &[f, r, c], &[], "temporaries");
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 300000 && exec \"$0\" \"$@\"")
        .arg(&exe)
        .args(["1.5", "20000"])
        .output()
        .expect("sh starts");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{:?}:\n{out}{}", o.status, stderr(&o));
    let want = [
        line("value", &[&Val::F64(299_985_000.0)]),
        line("value", &[&Val::F64(30_000.0)]),
        line("grad", &[&Val::F64(20_000.0)]),
        line("value", &[&Val::F64(6.0)]),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
}

/// Derivatives at overflow (issue 27, finding 10; docs/rules.md,
/// "Infinities and NaN"): an exported gradient or Hessian-vector product
/// whose plain derivative has a NaN entry (`x * exp(y)` at y = 1000: `0 *
/// inf` where a cotangent or tangent is 0) runs the strong version the
/// object holds beside it, and gives what the library gives (which `irad
/// grad` prints), bit for bit; a derivative without NaN is the plain one,
/// bit for bit. The gradient's buffer is added into from its state on
/// entry (saved before the plain run and restored before the strong one);
/// arrays are back in their state on entry after a success, and an error is
/// the interpreter's.
#[test]
fn derivatives_at_overflow_fall_back_to_the_strong_version() {
    let d = dir("ieee");
    let file = format!("{ROOT}/tests/c/ieee.irad");
    let objs = vec![
        emit(&file, "issue", &["--grad", "--hvp"], &d, "issue"),
        emit(&file, "looped", &["--grad", "--hvp"], &d, "looped"),
        emit(&file, "written", &["--grad"], &d, "written"),
    ];
    let exe = link(&d, "ieee.c", &objs, &[], "ieee");
    let (src, module) = source(&file);
    let registry = irad::rules::Registry::new();
    fn request(f: irad::ir::FuncId, vals: &[Val]) -> irad::GradRequest<'_> {
        irad::GradRequest {
            opts: GradOptions {
                exec: Backend::Interp.exec(),
                ..GradOptions::default()
            },
            ..irad::GradRequest::new(f, vals)
        }
    }
    let issue = irad::find_function(&src, &module, "issue").expect("issue");
    let inf = f64::INFINITY;
    for (x, y) in [
        (2.0, 1000.0),
        (0.0, 1000.0),
        (-0.0, inf),
        (2.0, 3.0),
        (1.5, -2.0),
    ] {
        let vals = [Val::F64(x), Val::F64(y)];
        let (g, _) = irad::grad(&src, &module, &registry, &request(issue, &vals)).expect("grad");
        let t = [Val::F64(1.0), Val::F64(1.0)];
        let (h, _) = irad::hvp(&src, &module, &registry, &request(issue, &vals), &t).expect("hvp");
        let grads: Vec<&Val> = g.gradient.iter().flatten().collect();
        let mut want = vec![line("value", &[&g.value]), line("grad", &grads)];
        want.push(line("value", &[&h.value]));
        want.push(line(
            "grad",
            &h.gradient.iter().flatten().collect::<Vec<_>>(),
        ));
        want.push(line("hvp", &h.hvp.iter().flatten().collect::<Vec<_>>()));
        if (x, y) == (0.0, 1000.0) {
            // The strong entries: d/dy = x e^y is 0, where the plain
            // product is 0 * inf = NaN.
            assert_eq!(want[1], line("grad", &[&Val::F64(inf), &Val::F64(0.0)]));
        }
        let got = run(&exe, &["issue".into(), format!("{x:?}"), format!("{y:?}")]);
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "issue({x}, {y})");
    }
    // Arrays: the buffer starting at 0 or at 0.5 in every entry (`looped`
    // reads its x once per entry: the buffer ends at 0.5 + the gradient).
    let cases: &[(&str, &[f64], f64, f64)] = &[
        ("looped", &[0.0, 1.0], 1000.0, 0.0),
        ("looped", &[0.0, 1.0], 1000.0, 0.5),
        ("looped", &[1.0, -1.0], 3.0, 0.5),
        ("written", &[1.0, 2.0, 5.0], 1000.0, 0.0),
        ("written", &[0.0, 2.0, 5.0], 1000.0, 0.0),
        ("written", &[1.0, 2.0, 5.0], 3.0, 0.0),
    ];
    for &(func, xs, y, g0) in cases {
        let f = irad::find_function(&src, &module, func).expect("function");
        let vals = [Val::f64_array(xs.to_vec()), Val::F64(y)];
        let (g, _) = irad::grad(&src, &module, &registry, &request(f, &vals)).expect("grad");
        let mut entries = Vec::new();
        values::leaves(g.gradient[0].as_ref().expect("d/dx"), &mut entries);
        let entries: Vec<Val> = entries.iter().map(|e| Val::F64(g0 + e)).collect();
        let gy = g.gradient[1].clone().expect("d/dy");
        let mut grads: Vec<&Val> = entries.iter().collect();
        grads.push(&gy);
        let want = [
            line("value", &[&g.value]),
            line("grad", &grads),
            line("x", &[&vals[0]]),
        ];
        let mut cmd = vec![func.to_string()];
        cmd.extend(argv(&vals));
        cmd.push(format!("{g0:?}"));
        let got = run(&exe, &cmd);
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            want,
            "{func}({xs:?}, {y}), buffer {g0}"
        );
    }
    // The Hessian-vector product's buffers: the gradient's and the
    // product's start at g0, the direction is all ones and stays so.
    let looped = irad::find_function(&src, &module, "looped").expect("looped");
    for (xs, y, g0) in [
        (vec![0.0, 1.0], 1000.0, 0.0),
        (vec![0.0, 1.0], 1000.0, 0.5),
        (vec![1.0, -1.0], 3.0, 0.5),
    ] {
        let n = xs.len();
        let vals = [Val::f64_array(xs.clone()), Val::F64(y)];
        let t = [Val::f64_array(vec![1.0; n]), Val::F64(1.0)];
        let (h, _) = irad::hvp(&src, &module, &registry, &request(looped, &vals), &t).expect("hvp");
        let plus = |entries: &[Option<Val>]| -> Vec<Val> {
            let mut xs = Vec::new();
            values::leaves(entries[0].as_ref().expect("d/dx"), &mut xs);
            let mut out: Vec<Val> = xs.iter().map(|e| Val::F64(g0 + e)).collect();
            out.push(entries[1].clone().expect("d/dy"));
            out
        };
        let (grads, hvps) = (plus(&h.gradient), plus(&h.hvp));
        let want = [
            line("value", &[&h.value]),
            line("grad", &grads.iter().collect::<Vec<_>>()),
            line("x", &[&vals[0]]),
            line("hvp", &hvps.iter().collect::<Vec<_>>()),
            line("dir", &[&t[0]]),
        ];
        let mut cmd = vec!["looped_hvp".to_string()];
        cmd.extend(argv(&vals));
        cmd.push(format!("{g0:?}"));
        let got = run(&exe, &cmd);
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            want,
            "looped_hvp({xs:?}, {y}), buffers {g0}"
        );
    }
    // An error (x[2] of an array of 2) is the interpreter's, at overflow
    // too.
    let written = irad::find_function(&src, &module, "written").expect("written");
    let vals = [Val::f64_array(vec![1.0, 2.0]), Val::F64(1000.0)];
    let err = irad::grad(&src, &module, &registry, &request(written, &vals))
        .expect_err("the interpreter fails too");
    let mut cmd = vec!["written".to_string()];
    cmd.extend(argv(&vals));
    cmd.push("0.0".into());
    let got = run(&exe, &cmd);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines[0], format!("status {}", rt::TrapKind::Index.code()));
    assert_eq!(lines[1], interp_error_lines(&err, &src)[0]);
}
