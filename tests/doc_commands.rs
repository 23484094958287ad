//! The shell sessions of the docs run as written: every fenced block tagged
//! `console` in README.md and docs/*.md is a session of commands and their
//! expected output, and this test runs it and compares.
//!
//! The convention (docs/tutorial.md says it too):
//! - a line starting with `$ ` is a command; the lines after it, up to the next
//!   command or the end of the block, are what it prints: standard output, then
//!   standard error, then a line `[exit: N]` when the exit status N is not 0;
//! - an expected line may contain `[..]`, which matches any text within the
//!   line (for timings, as `irad bench` prints them); everything else must be
//!   equal exactly;
//! - each command runs with `sh -c` in a scratch directory, one per document
//!   and shared by its blocks in order (so a later command can use a file an
//!   earlier one wrote), where `examples` is the repository's `examples/`, and
//!   `target/release/libirad_runtime.a` is the runtime library of this build;
//!   `irad` on PATH is the binary under test. So the commands read as a
//!   newcomer types them at the repository's root after `cargo build --release`.
//!
//! Blocks tagged `sh` are set-up steps (building irad itself) and are not run.
//! `IRAD_BLESS=1 cargo test --test doc_commands` rewrites the expected output of
//! every command that differs (a command whose output matches, wildcards
//! included, is left as it is).

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One command of a session and its expected output lines.
struct Cmd {
    /// The command without `$ `.
    text: String,
    /// Line index (0-based) of the `$ ` line in the document.
    line: usize,
    /// Expected output lines.
    expected: Vec<String>,
}

/// The commands of every `console` block of `doc`, in order.
fn sessions(doc: &str) -> Vec<Cmd> {
    let mut out: Vec<Cmd> = Vec::new();
    let mut inside = false;
    for (i, line) in doc.lines().enumerate() {
        if !inside {
            inside = line.trim_end() == "```console";
            continue;
        }
        if line.trim_end() == "```" {
            inside = false;
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            out.push(Cmd {
                text: cmd.to_string(),
                line: i,
                expected: Vec::new(),
            });
        } else if let Some(last) = out.last_mut() {
            last.expected.push(line.to_string());
        } else {
            panic!("line {}: output before the first `$ ` command", i + 1);
        }
    }
    assert!(!inside, "a ```console block is not closed");
    out
}

/// Whether `actual` matches the expected line `want` (`[..]` matches any text).
fn line_matches(want: &str, actual: &str) -> bool {
    let parts: Vec<&str> = want.split("[..]").collect();
    if parts.len() == 1 {
        return want == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(k) => rest = &rest[k + mid.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

fn output_matches(want: &[String], actual: &[String]) -> bool {
    want.len() == actual.len() && want.iter().zip(actual).all(|(w, a)| line_matches(w, a))
}

/// The target directory of this test run (`CARGO_TARGET_TMPDIR` is its `tmp`).
fn target_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).to_path_buf()
}

/// `libirad_runtime.a` of this build (as tests/emit.rs finds it).
fn runtime_lib() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(["build", "-p", "irad-runtime", "--message-format=json"])
        .arg("--target-dir")
        .arg(target_dir())
        .current_dir(ROOT)
        .output()
        .expect("cargo starts");
    assert!(
        out.status.success(),
        "cargo build -p irad-runtime failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "irad_runtime")
        .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| f.extension().is_some_and(|e| e == "a"))
        .expect("cargo reports the static library of irad-runtime")
}

/// A fresh scratch directory for `doc`, laid out as the repository's root.
fn scratch(doc: &str, lib: &Path) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("doc_commands")
        .join(doc.replace('/', "_"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("target/release")).expect("scratch dir");
    std::os::unix::fs::symlink(Path::new(ROOT).join("examples"), d.join("examples"))
        .expect("link examples");
    std::os::unix::fs::symlink(lib, d.join("target/release/libirad_runtime.a"))
        .expect("link the runtime");
    d
}

/// Runs `cmd` in `dir`; returns its output lines as the docs show them.
fn run(cmd: &str, dir: &Path) -> Vec<String> {
    let bin = Path::new(env!("CARGO_BIN_EXE_irad"))
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(&path));
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).expect("PATH"))
        .output()
        .expect("sh starts");
    let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&o.stderr));
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    match o.status.code() {
        Some(0) => {}
        Some(n) => lines.push(format!("[exit: {n}]")),
        None => lines.push("[exit: signal]".into()),
    }
    lines
}

#[test]
fn console_blocks_of_the_docs_print_what_they_show() {
    let mut docs = vec![PathBuf::from("README.md")];
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter_map(|p| p.strip_prefix(ROOT).ok().map(Path::to_path_buf))
        .collect();
    in_docs.sort();
    docs.extend(in_docs);
    let bless = std::env::var_os("IRAD_BLESS").is_some();
    let lib = runtime_lib();
    let mut failures = Vec::new();
    let mut ran = 0;
    for doc in docs {
        let path = Path::new(ROOT).join(&doc);
        let text = std::fs::read_to_string(&path).expect("readable doc");
        let cmds = sessions(&text);
        if cmds.is_empty() {
            continue;
        }
        let dir = scratch(&doc.display().to_string(), &lib);
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        // Replacements (line, old count, new lines), applied last first.
        let mut edits = Vec::new();
        for cmd in &cmds {
            ran += 1;
            let actual = run(&cmd.text, &dir);
            if output_matches(&cmd.expected, &actual) {
                continue;
            }
            failures.push(format!(
                "{}:{}: `{}` printed\n{}\n--- but the doc shows\n{}\n",
                doc.display(),
                cmd.line + 1,
                cmd.text,
                actual.join("\n"),
                cmd.expected.join("\n")
            ));
            edits.push((cmd.line + 1, cmd.expected.len(), actual));
        }
        if bless && !edits.is_empty() {
            for (at, n, new) in edits.into_iter().rev() {
                lines.splice(at..at + n, new);
            }
            std::fs::write(&path, lines.join("\n") + "\n").expect("write the doc");
        }
    }
    assert!(ran > 0, "no ```console blocks found");
    assert!(
        failures.is_empty() || bless,
        "{} command(s) of the docs print something else (IRAD_BLESS=1 rewrites the docs):\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn wildcards_match_within_a_line_only() {
    assert!(line_matches("compile: [..] ms", "compile: 12.5 ms"));
    assert!(line_matches("[..]", "anything"));
    assert!(line_matches("a [..] b [..] c", "a 1 b 2 c"));
    assert!(!line_matches("a [..] c", "a 1 b"));
    assert!(!line_matches("ab[..]ba", "aba"));
    assert!(!line_matches("exact", "exact "));
}
