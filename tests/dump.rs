//! `irad dump --after PASS` and `--all-passes` at the command line: the output
//! is valid IR text (each `# after PASS` section on its own), unknown pass names
//! are usage errors (exit 2, clap lists the pass names), and the two flags
//! exclude each other; `--bisect-limit N` runs the first N passes and logs
//! every pass on stderr (each top-level step of `--schedule` a pass of its
//! own, so a limit inside a schedule skips its later steps). `--all-passes`
//! shows every round of the group `simplify` that changed the module;
//! `--after` one of its passes stops after that pass's first run.

use irad::ir::text::parse_module;
use irad::ir::verify::verify_module;
use std::process::{Command, Output};

const FILE: &str = "tests/filetests/passes/normalise_all.ir";

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("irad starts")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn after_the_last_pass_is_the_normalised_module() {
    let out = irad(&["dump", FILE, "--after", "single_return"]);
    assert_eq!(out.status.code(), Some(0));
    let expected = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/filetests/passes/normalise_all.normalise.ir"),
    )
    .expect("the blessed output exists");
    assert_eq!(stdout(&out), expected);
}

#[test]
fn after_a_middle_pass_stops_there() {
    let out = irad(&["dump", FILE, "--after", "fold_constant_branches"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(!text.contains("gotoifnot false"), "{text}");
    // Unreachable #3 is still there: removing it is the next pass.
    assert!(text.contains("#3:"), "{text}");
    let m = parse_module(&text).expect("output parses");
    assert!(verify_module(&m).is_ok());
}

#[test]
fn all_passes_prints_one_valid_section_per_pass() {
    let out = irad(&["dump", FILE, "--all-passes", "-f", "f"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("# ")).collect();
    // simplify's second round changes nothing, so it is not shown.
    assert_eq!(
        headers,
        [
            "# input",
            "# after uniform_constant_operands",
            "# after fold_constant_branches",
            "# after remove_unreachable_blocks",
            "# after remove_trivial_phis",
            "# after split_critical_edges",
            "# after single_return",
        ]
    );
    // Each section, with its header comment, is a module of its own.
    let mut sections: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("# ") {
            sections.push(String::new());
        }
        if let Some(section) = sections.last_mut() {
            section.push_str(line);
            section.push('\n');
        }
    }
    assert_eq!(sections.len(), 7);
    for section in &sections {
        let m = parse_module(section).expect("each section parses");
        assert!(verify_module(&m).is_ok(), "{section}");
    }
    assert!(text.starts_with("# input\nfunc @f"));
}

#[test]
fn all_passes_as_dot() {
    let out = irad(&["dump", FILE, "--all-passes", "--format", "dot"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out).matches("digraph irad").count(), 7);
}

const FIXPOINT: &str = "tests/filetests/passes/simplify_fixpoint.ir";

#[test]
fn all_passes_shows_every_round_of_simplify_that_changed() {
    let out = irad(&["dump", FIXPOINT, "--all-passes"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("# after ")).collect();
    let round = [
        "# after uniform_constant_operands",
        "# after fold_constant_branches",
        "# after remove_unreachable_blocks",
        "# after remove_trivial_phis",
    ];
    let tail = ["# after split_critical_edges", "# after single_return"];
    assert_eq!(headers, [&round[..], &round, &round, &tail].concat());
}

/// `--after` a pass of simplify stops after its first run; `--after simplify`
/// shows the fixpoint.
#[test]
fn after_a_pass_of_simplify_is_its_first_run() {
    let first = stdout(&irad(&["dump", FIXPOINT, "--after", "remove_trivial_phis"]));
    assert!(first.contains("gotoifnot true, #5"), "{first}");
    let fixpoint = stdout(&irad(&["dump", FIXPOINT, "--after", "simplify"]));
    assert!(!fixpoint.contains("gotoifnot true"), "{fixpoint}");
    assert!(!fixpoint.contains("gotoifnot false"), "{fixpoint}");
    assert!(!fixpoint.contains("phi"), "{fixpoint}");
}

#[test]
fn unknown_pass_is_a_usage_error_listing_the_passes() {
    let out = irad(&["dump", FILE, "--after", "no_such_pass"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("split_critical_edges"), "{err}");
}

#[test]
fn after_and_all_passes_exclude_each_other() {
    let out = irad(&["dump", FILE, "--after", "single_return", "--all-passes"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn surface_files_dump_after_passes_too() {
    let out = irad(&[
        "dump",
        "tests/filetests/passes/normalise_surface.irad",
        "--after",
        "single_return",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert_eq!(text.matches("return").count(), 1, "{text}");
}

#[test]
fn switch_edges_are_labelled_with_their_index() {
    let out = irad(&[
        "dump",
        "tests/filetests/ad/switch.ir",
        "-f",
        "pick",
        "--format",
        "dot",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let dot = stdout(&out);
    for k in 0..3 {
        assert_eq!(
            dot.matches(&format!("[label=\"{k}\"]")).count(),
            1,
            "edge {k}:\n{dot}"
        );
    }
    assert_eq!(dot.matches(" -> f0_").count(), 5, "{dot}");
    assert!(dot.contains("f0_b0 -> f0_b3 [label=\"0\"]"), "{dot}");
}

/// The examples of docs/reverse.md (the worked example, the checkpointed
/// loop) are the output of the command each marker comment names, exactly.
#[test]
fn the_reverse_mode_example_in_the_docs_is_what_dump_prints() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reverse.md"))
        .expect("docs/reverse.md");
    let marker = "<!-- reverse-example: irad ";
    let mut checked = 0;
    for (start, _) in doc.match_indices(marker) {
        let rest = &doc[start + marker.len()..];
        let (command, rest) = rest
            .split_once(" -->\n```\n")
            .expect("a code block after the marker");
        let (block, _) = rest.split_once("\n```\n").expect("the code block ends");
        let args: Vec<&str> = command.split_whitespace().collect();
        let out = irad(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout(&out).trim_end(), block.trim_end(), "{command}");
        checked += 1;
    }
    assert!(checked >= 2, "{checked} examples");
}

/// `--bisect-limit N` runs passes 1 to N: a limit past the last pass changes
/// nothing (under `--mode rev` the normalisation passes are required, since
/// reverse mode needs them), a limit of 2 (`uniform_constant_operands`,
/// `fold_constant_branches`) prints what `--after fold_constant_branches`
/// prints, and every pass is logged on stderr, the skipped ones as `NOT`.
#[test]
fn bisect_limit_runs_the_first_passes_and_logs_them() {
    let all = irad(&["dump", FILE, "--mode", "rev", "--bisect-limit", "1000"]);
    let plain = irad(&["dump", FILE, "--mode", "rev"]);
    assert_eq!(all.status.code(), Some(0));
    assert_eq!(stdout(&all), stdout(&plain));
    let log = String::from_utf8_lossy(&all.stderr).into_owned();
    assert!(
        log.starts_with("BISECT: running pass (1) uniform_constant_operands (required)\n"),
        "{log}"
    );
    assert!(log.contains(" reverse (required)\n"), "{log}");
    assert!(!log.contains("NOT"), "{log}");

    let two = irad(&["dump", FILE, "--bisect-limit", "2"]);
    let after = irad(&["dump", FILE, "--after", "fold_constant_branches"]);
    assert_eq!(two.status.code(), Some(0));
    assert_eq!(stdout(&two), stdout(&after));
    let log = String::from_utf8_lossy(&two.stderr).into_owned();
    assert!(
        log.contains("BISECT: running pass (2) fold_constant_branches\n"),
        "{log}"
    );
    assert!(
        log.contains("BISECT: NOT running pass (3) remove_unreachable_blocks\n"),
        "{log}"
    );
    assert!(plain.stderr.is_empty());
}

/// Each top-level step of `--schedule` is a numbered pass: with the limit
/// at the first step (after the ten normalisation passes and the required
/// `reverse`), that step runs and the later ones are skipped, each logged
/// with its name; `--all-passes` then has a section for the first step only,
/// and the dump is the module after that step.
#[test]
fn bisect_limit_inside_a_schedule_skips_the_later_steps() {
    let file = "examples/rosenbrock.irad";
    let schedule = "normalise(dce <+ fold); try(cse); licm";
    let dump = |extra: &[&str]| {
        let mut args = vec!["dump", file, "--mode", "rev", "--schedule"];
        args.push(schedule);
        args.extend_from_slice(extra);
        irad(&args)
    };
    let limited = dump(&["--bisect-limit", "12", "--all-passes"]);
    assert_eq!(
        limited.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&limited.stderr)
    );
    let log = String::from_utf8_lossy(&limited.stderr).into_owned();
    assert!(
        log.ends_with(
            "BISECT: running pass (11) reverse (required)\n\
             BISECT: running pass (12) optimise: normalise(dce <+ fold)\n\
             BISECT: NOT running pass (13) optimise: try(cse)\n\
             BISECT: NOT running pass (14) optimise: licm\n"
        ),
        "{log}"
    );
    let text = stdout(&limited);
    let steps: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("# after ") && l.contains('('))
        .collect();
    assert_eq!(steps, ["# after normalise(dce <+ fold)"]);

    // The module printed is the one after the first step alone.
    let first = irad(&[
        "dump",
        file,
        "--mode",
        "rev",
        "--schedule",
        "normalise(dce <+ fold)",
    ]);
    let limited = dump(&["--bisect-limit", "12"]);
    let all = dump(&[]);
    assert_eq!(stdout(&limited), stdout(&first));
    assert_ne!(stdout(&limited), stdout(&all), "try(cse) changes nothing");
}
