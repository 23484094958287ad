//! Regressions found in review, at the command line: a panic on a closed
//! output pipe and quadratic error rendering.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `text` to a fresh file named `name` in a per-test directory.
fn file(test: &str, name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("review")
        .join(test);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("temp file");
    path
}

/// `n` small functions: their printed text is far larger than a pipe buffer.
fn many_functions(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!("func @f{i}(%x: f64) -> f64 {{\n#1:\n  %y = call sin(%x)\n  return %y\n}}\n")
        })
        .collect()
}

#[test]
fn a_closed_output_pipe_is_not_a_panic() {
    // `irad dump big.ir | head -1` used to panic in `print!` (exit 101,
    // "failed printing to stdout: Broken pipe").
    let path = file("pipe", "big.ir", &many_functions(20_000));
    let mut child = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(["dump", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("irad starts");
    let mut first = [0u8; 16];
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(&first, b"func @f0(%x: f64");
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(err, "");
}

#[test]
fn many_verification_errors_render_in_linear_time() {
    // 20 000 errors used to take 30 s: each rendered snippet re-indexed the
    // whole file.
    let n = 20_000;
    let mut text = String::from("func @f(%x: i64) -> i64 {\n#0:\n  %c = call lt(%x, 0)\n");
    for i in 1..n {
        text.push_str(&format!(
            "  gotoifnot %c, #{}\n#{}:\n  goto #{i}\n#{i}:\n",
            n + i,
            n + i
        ));
    }
    text.push_str("  return %x\n}\n");
    let path = file("many", "f.ir", &text);
    let start = Instant::now();
    let o = irad(&["check", path.to_str().unwrap()]);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.matches(": error: gotoifnot jumps to").count(), n - 1);
    let last = format!(
        "f.ir:{}:3: error: gotoifnot jumps to #{} and falls through to #{}",
        4 * (n - 1),
        2 * n - 1,
        2 * n - 1
    );
    assert!(err.contains(&last), "{last}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
