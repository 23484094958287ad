//! `irad --help` and each subcommand's `--help` say what it does and show at
//! least one example (`  $ irad ...` lines under `Example`), and every
//! example runs successfully as written: from a scratch directory where
//! `examples` is the repository's `examples/` (so `emit`'s output lands
//! there), with the `irad` under test on PATH.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const SUBCOMMANDS: [&str; 11] = [
    "run",
    "grad",
    "jvp",
    "jacobian",
    "hvp",
    "hessian",
    "bench",
    "check",
    "dump",
    "emit",
    "test-rules",
];

fn help(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts");
    assert!(o.status.success(), "irad {args:?} failed");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The example commands of a help text: the lines `  $ irad ...` after a
/// line starting with `Example`.
fn examples(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Example"))
        .filter_map(|l| l.strip_prefix("  $ "))
        .map(str::to_string)
        .collect()
}

/// A fresh scratch directory for the test `name`.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_help")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    std::os::unix::fs::symlink(Path::new(ROOT).join("examples"), d.join("examples"))
        .expect("link examples");
    d
}

fn run_example(cmd: &str, dir: &Path) {
    let bin = Path::new(env!("CARGO_BIN_EXE_irad"))
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).expect("PATH"))
        .output()
        .expect("sh starts");
    assert!(
        o.status.success(),
        "the help's example `{cmd}` failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn top_level_help_says_what_irad_does_and_its_examples_run() {
    let text = help(&["--help"]);
    assert!(text.contains("differentiates"), "{text}");
    for sub in SUBCOMMANDS {
        assert!(
            text.contains(&format!("  {sub} ")),
            "`irad --help` lists no `{sub}`:\n{text}"
        );
    }
    let cmds = examples(&text);
    assert!(!cmds.is_empty(), "`irad --help` shows no example:\n{text}");
    let dir = scratch("top_level");
    for cmd in cmds {
        run_example(&cmd, &dir);
    }
}

#[test]
fn each_subcommand_help_shows_an_example_of_itself_that_runs() {
    let dir = scratch("subcommands");
    for sub in SUBCOMMANDS {
        let text = help(&[sub, "--help"]);
        assert_eq!(
            text,
            help(&["help", sub]),
            "`irad help {sub}` differs from `--help`"
        );
        let cmds = examples(&text);
        assert!(
            !cmds.is_empty(),
            "`irad {sub} --help` shows no example:\n{text}"
        );
        for cmd in cmds {
            assert!(
                cmd.starts_with(&format!("irad {sub} ")),
                "an example of `irad {sub} --help` runs another command: {cmd}"
            );
            run_example(&cmd, &dir);
        }
    }
    assert!(dir.join("rosenbrock.o").exists() && dir.join("rosenbrock.h").exists());
}
