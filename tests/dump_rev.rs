//! `irad dump --mode rev|fwd` prints what `irad grad` compiles: the derived
//! functions after the default schedule, equal (function by function) to the
//! module `irad::grad` builds through the facade; `--schedule id` and
//! `--after reverse` print the raw derivation (`irad::reverse_module`,
//! `irad::forward_module`). After each forward sweep `@f.rev.fwd` the tape
//! plan is printed as `#` comment lines, named as the printed code names its
//! values: every value the plan says is pushed is pushed, by name, in the
//! function printed above it, in each section that has it (`--all-passes`),
//! after a schedule that renamed it too. `--bisect-limit` numbers the default
//! schedule's steps; `--format dot` has no comments.
//!
//! Assumes the files named below keep their functions and `# run:` lines.

use irad::ir::Module;
use irad::ir::text::{parse_module, print_func};
use irad::{GradRequest, Mode, Source};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// (file, function, arguments): functions whose derivation the default
/// schedule changes, some of them renaming saved values.
const CASES: &[(&str, &str, &str)] = &[
    ("examples/rosenbrock.irad", "rosenbrock", "[1.5, 0.5, -0.3]"),
    (
        "tests/filetests/reverse/straight_line.ir",
        "poly",
        "0.5, -1.25, 3",
    ),
    ("tests/filetests/reverse/tuples.ir", "use", "(1.5, 2), 2.0"),
    ("tests/filetests/reverse/loop_phi.ir", "pow_loop", "1.5, 3"),
    (
        "tests/filetests/reverse/branch_phi.ir",
        "hinge3",
        "0.5, 3.0",
    ),
];

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("irad starts")
}

/// The standard output of a run that must succeed.
fn succeeds(args: &[&str]) -> String {
    let o = irad(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn source(path: &str) -> Source {
    let text = std::fs::read_to_string(format!("{ROOT}/{path}")).expect("the file exists");
    Source::new(path, &text)
}

/// The module `irad grad` builds (normalised primal, derived functions
/// after the default schedule) for `func` of `path` at `args` in `mode`.
fn grad_module(path: &str, func: &str, args: &str, mode: Mode) -> (Module, Module) {
    let src = source(path);
    let m = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &m, func).expect("the function");
    let args = irad::parse_args(&Source::new("<args>", args), &m, f).expect("args");
    let registry = irad::rules::Registry::new();
    let req = GradRequest {
        mode,
        ..GradRequest::new(f, &args)
    };
    let (_, built) = irad::grad(&src, &m, &registry, &req).expect("the gradient");
    (m, built)
}

/// The functions `built` added to `input`, each printed, by name.
fn derived(input: &Module, built: &Module) -> Vec<(String, String)> {
    built
        .func_ids()
        .skip(input.len())
        .map(|id| (built[id].name.clone(), print_func(built, id)))
        .collect()
}

/// Asserts that every function of `expected` is printed, the same, in
/// `dump` (IR text with comments, which parses).
fn assert_printed(dump: &str, expected: &[(String, String)], what: &str) {
    let m = parse_module(dump).unwrap_or_else(|e| panic!("{what}: {e}\n{dump}"));
    assert!(!expected.is_empty(), "{what}: nothing derived");
    for (name, text) in expected {
        let id = m
            .by_name(name)
            .unwrap_or_else(|| panic!("{what}: no @{name} in\n{dump}"));
        assert_eq!(&print_func(&m, id), text, "{what}: @{name}");
    }
}

#[test]
fn dump_rev_is_what_grad_compiles() {
    let mut changed = Vec::new();
    for &(path, func, args) in CASES {
        let (input, built) = grad_module(path, func, args, Mode::Reverse);
        let dump = succeeds(&["dump", path, "--mode", "rev", "-f", func]);
        assert_printed(&dump, &derived(&input, &built), path);
        let raw = succeeds(&[
            "dump",
            path,
            "--mode",
            "rev",
            "-f",
            func,
            "--schedule",
            "id",
        ]);
        if raw != dump {
            changed.push(path);
        }
    }
    // The default schedule is what made the difference, for these at least.
    for path in [CASES[0].0, CASES[1].0, CASES[2].0] {
        assert!(
            changed.contains(&path),
            "{path}: the schedule changed nothing"
        );
    }
}

#[test]
fn dump_fwd_is_what_grad_compiles() {
    for &(path, func, args) in CASES {
        let (input, built) = grad_module(path, func, args, Mode::Forward);
        let dump = succeeds(&["dump", path, "--mode", "fwd", "-f", func]);
        assert_printed(&dump, &derived(&input, &built), path);
    }
}

/// `--schedule id` (and `--after reverse`, which stops before the schedule)
/// prints the derivation as `irad::reverse_module` builds it.
#[test]
fn schedule_id_shows_the_raw_derivation() {
    for &(path, func, _) in CASES {
        let src = source(path);
        let m = irad::load(&src).expect("loads");
        let f = irad::find_function(&src, &m, func).expect("the function");
        let registry = irad::rules::Registry::new();
        let (raw, added, _) = irad::reverse_module(&src, &m, &[f], &registry).expect("derives");
        let expected: Vec<(String, String)> = added
            .iter()
            .map(|&id| (raw[id].name.clone(), print_func(&raw, id)))
            .collect();
        let id = succeeds(&[
            "dump",
            path,
            "--mode",
            "rev",
            "-f",
            func,
            "--schedule",
            "id",
        ]);
        assert_printed(&id, &expected, path);
        let after = succeeds(&[
            "dump", path, "--mode", "rev", "-f", func, "--after", "reverse",
        ]);
        assert_eq!(after, id, "{path}");

        let (fwd, added) =
            irad::forward_module(&src, &m, &[f], irad::ir::Lanes::ONE, &registry).expect("rules");
        let expected: Vec<(String, String)> = added
            .iter()
            .map(|&id| (fwd[id].name.clone(), print_func(&fwd, id)))
            .collect();
        let id = succeeds(&[
            "dump",
            path,
            "--mode",
            "fwd",
            "-f",
            func,
            "--schedule",
            "id",
        ]);
        assert_printed(&id, &expected, path);
    }
}

/// The tape comments after `@NAME` in `section` (each without `#   `), and
/// the function's text; `None` when there is no `# tape of @NAME:` header.
fn tape_of(section: &str, name: &str) -> Option<(Vec<String>, String)> {
    let header = format!("func @{name}(");
    let start = section.find(&header)?;
    let body = &section[start..];
    let end = body.find("\n}\n")? + 3;
    let func = body[..end].to_string();
    let rest = body[end..].strip_prefix(&format!("# tape of @{name}:"))?;
    let mut lines = rest.lines();
    let first = lines.next()?.to_string();
    if !first.is_empty() {
        return Some((vec![first.trim().to_string()], func));
    }
    let tape = lines
        .map_while(|l| l.strip_prefix("#   "))
        .map(String::from)
        .collect();
    Some((tape, func))
}

/// The text of block `#label` of the printed function `func`: its lines
/// after the label, up to the next label or the function's end.
fn block_text(func: &str, label: &str) -> Option<String> {
    let head = format!("#{label}:");
    let mut lines = func.lines().skip_while(|l| *l != head);
    lines.next()?;
    let body: Vec<&str> = lines
        .take_while(|l| {
            let is_label = l.starts_with('#')
                && l.ends_with(':')
                && l[1..l.len() - 1].chars().all(|c| c.is_ascii_digit());
            !is_label && *l != "}"
        })
        .collect();
    Some(body.join("\n"))
}

/// Asserts that each value of `tape` (a line `%NAME: TYPE  pushed ...`) is
/// pushed by name in `func`, and each predecessor index line names a
/// constant it pushes; returns how many values were checked.
fn assert_tape_matches(tape: &[String], func: &str, what: &str) -> usize {
    let mut checked = 0;
    for line in tape.iter().filter(|l| *l != "nothing recorded") {
        let Some((name, _)) = line.split_once(": ") else {
            panic!("{what}: malformed tape line `{line}`");
        };
        // A checkpointed loop's line names the values its snapshots push.
        if !line.contains("pushed") || line.starts_with("loop #") {
            continue;
        }
        let push = format!("call push({name})");
        assert!(
            func.contains(&push),
            "{what}: `{line}` but no `{push}` in\n{func}"
        );
        // A push at a block's end is in that block (a loop's exit blocks
        // each push a value of their own: the name must be that one).
        if let Some(label) = line
            .split_once("pushed at the end of #")
            .and_then(|(_, rest)| rest.split([',', ' ']).next())
        {
            let body = block_text(func, label)
                .unwrap_or_else(|| panic!("{what}: `{line}` but no block #{label} in\n{func}"));
            assert!(
                body.contains(&push),
                "{what}: `{line}` but block #{label} has no `{push}`:\n{body}"
            );
        }
        checked += 1;
    }
    checked
}

#[test]
fn the_tape_plan_follows_each_forward_sweep_with_the_printed_names() {
    for &(path, func, _) in CASES {
        let name = format!("{func}.rev.fwd");
        for schedule in [None, Some("id")] {
            let mut args = vec!["dump", path, "--mode", "rev", "-f", func];
            if let Some(s) = schedule {
                args.extend(["--schedule", s]);
            }
            let dump = succeeds(&args);
            let what = format!("{path} {schedule:?}");
            let (tape, text) = tape_of(&dump, &name)
                .unwrap_or_else(|| panic!("{what}: no tape comments in\n{dump}"));
            assert!(!tape.is_empty(), "{what}");
            assert!(assert_tape_matches(&tape, &text, &what) > 0, "{what}");
            // The plan's own derivation named its values as this one does.
            assert!(!dump.contains("separate derivation"), "{what}");
            // Only the forward sweep has one.
            assert!(
                tape_of(&dump, &format!("{func}.rev.back")).is_none(),
                "{what}"
            );
        }
    }
    // A forward sweep that records nothing says so.
    let dump = succeeds(&["dump", "examples/rosenbrock.irad", "--mode", "rev"]);
    assert!(
        dump.contains("}\n# tape of @main_like.rev.fwd: nothing recorded\n"),
        "{dump}"
    );
}

/// Every tape printed for the reverse-mode filetests and the examples (every
/// function of each file derived) is true to the code above it: each value
/// it says is pushed is pushed, by that name.
#[test]
fn every_tape_of_the_reverse_filetests_matches_its_code() {
    let mut files: Vec<String> = Vec::new();
    for dir in ["tests/filetests/reverse", "examples"] {
        let entries = std::fs::read_dir(format!("{ROOT}/{dir}")).expect("the directory");
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let source = name.ends_with(".irad")
                || (name.ends_with(".ir") && name.matches('.').count() == 1);
            if source {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    let mut tapes = 0;
    for path in &files {
        let dump = succeeds(&["dump", path, "--mode", "rev"]);
        let names: Vec<&str> = dump
            .lines()
            .filter_map(|l| l.strip_prefix("# tape of @")?.split_once(':'))
            .map(|(name, _)| name)
            .collect();
        for name in names {
            let (tape, func) = tape_of(&dump, name).expect("the header is after its function");
            assert_tape_matches(&tape, &func, &format!("{path} @{name}"));
            tapes += 1;
        }
        assert!(!dump.contains("separate derivation"), "{path}");
    }
    assert!(
        files.len() > 10 && tapes > 20,
        "{} files, {tapes} tapes",
        files.len()
    );
}

/// The default schedule renames saved values of @poly.rev.fwd (a derivative
/// it folds); the plan uses the new names, and the raw one the old.
#[test]
fn the_tape_plan_is_renamed_after_the_schedule() {
    let path = "tests/filetests/reverse/straight_line.ir";
    let line = |schedule: &str| {
        let dump = succeeds(&[
            "dump",
            path,
            "--mode",
            "rev",
            "-f",
            "poly",
            "--schedule",
            schedule,
        ]);
        let (tape, _) = tape_of(&dump, "poly.rev.fwd").expect("a tape");
        tape.into_iter()
            .find(|l| l.contains("statement 8"))
            .expect("the save of powi's derivative")
    };
    let default = irad::passes::optimise::DEFAULT_SCHEDULE;
    assert_ne!(line("id"), line(default));
    assert!(line(default).starts_with('%'), "{}", line(default));
}

#[test]
fn all_passes_shows_the_default_schedule_with_a_tape_in_each_section() {
    let path = "examples/rosenbrock.irad";
    let dump = succeeds(&[
        "dump",
        path,
        "--mode",
        "rev",
        "-f",
        "rosenbrock",
        "--all-passes",
    ]);
    let headers: Vec<&str> = dump.lines().filter(|l| l.starts_with("# after ")).collect();
    let tail = &headers[headers.len() - 5..];
    assert_eq!(
        tail,
        [
            "# after reverse",
            "# after normalise(dce <+ fold <+ identities <+ copyprop <+ phi-simplify <+ branch-fold)",
            "# after try(memfwd)",
            "# after try(cse)",
            "# after try(licm)",
        ]
    );
    // One BBCode, heading the reverse section.
    assert_eq!(dump.matches("# bbcode @rosenbrock(").count(), 1);
    let reverse = dump.find("# after reverse").expect("the reverse section");
    assert!(dump.find("# bbcode @rosenbrock(") > Some(reverse));
    // A tape in each section from reverse on, true to that section's code.
    let sections: Vec<&str> = dump[reverse..].split("\n# after ").collect();
    assert_eq!(sections.len(), 5);
    for section in sections {
        let (tape, func) = tape_of(section, "rosenbrock.rev.fwd").expect("a tape");
        assert!(assert_tape_matches(&tape, &func, section.lines().next().unwrap_or("")) > 0);
    }
    // The last section is what the dump prints without `--all-passes`.
    let last = dump.rsplit("# rewrites: ").next().expect("a step section");
    let plain = succeeds(&["dump", path, "--mode", "rev", "-f", "rosenbrock"]);
    let module = |text: &str| text.find("func @").map(|i| text[i..].to_string());
    assert_eq!(module(last), module(&plain));
}

/// Each step of the default schedule is a numbered pass; a limit at the
/// derivation prints what `--after reverse` prints.
#[test]
fn bisect_limit_counts_the_default_schedule_steps() {
    let path = "examples/rosenbrock.irad";
    let o = irad(&["dump", path, "--mode", "rev", "--bisect-limit", "11"]);
    assert_eq!(o.status.code(), Some(0));
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        log.ends_with(
            "BISECT: running pass (11) reverse (required)\n\
             BISECT: NOT running pass (12) optimise: normalise(dce <+ fold <+ identities <+ copyprop <+ phi-simplify <+ branch-fold)\n\
             BISECT: NOT running pass (13) optimise: try(memfwd)\n\
             BISECT: NOT running pass (14) optimise: try(cse)\n\
             BISECT: NOT running pass (15) optimise: try(licm)\n"
        ),
        "{log}"
    );
    let after = succeeds(&["dump", path, "--mode", "rev", "--after", "reverse"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), after);
}

#[test]
fn dot_has_no_tape_comments() {
    let dot = succeeds(&[
        "dump",
        "examples/rosenbrock.irad",
        "--mode",
        "rev",
        "--format",
        "dot",
    ]);
    assert!(dot.starts_with("digraph"), "{dot}");
    assert!(!dot.contains("# tape"), "{dot}");
}

/// Under a tape limit (docs/reverse.md, "Checkpointing") every tape printed,
/// the forward sweep's and each replay function's, is true to the code above
/// it; the values a snapshot pushes are pushed by the forward sweep, by
/// name; the replay each checkpointed loop names is printed; and the dump is
/// what `irad grad --tape-limit` compiles.
#[test]
fn tapes_under_a_tape_limit_match_the_forward_sweep_and_the_replays() {
    let mut files: Vec<String> = Vec::new();
    for dir in [
        "tests/checkpoint",
        "tests/filetests/reverse",
        "benches/programs",
    ] {
        let entries = std::fs::read_dir(format!("{ROOT}/{dir}")).expect("the directory");
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".irad") || (name.ends_with(".ir") && name.matches('.').count() == 1)
            {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    let (mut replays, mut loops) = (0, 0);
    for path in &files {
        for limit in ["1", "1K"] {
            let dump = succeeds(&["dump", path, "--mode", "rev", "--tape-limit", limit]);
            let what = format!("{path} --tape-limit {limit}");
            assert!(!dump.contains("separate derivation"), "{what}");
            let names: Vec<&str> = dump
                .lines()
                .filter_map(|l| l.strip_prefix("# tape of @")?.split_once(':'))
                .map(|(name, _)| name)
                .collect();
            for name in names {
                let (tape, func) = tape_of(&dump, name).expect("the header is after its function");
                assert_tape_matches(&tape, &func, &format!("{what} @{name}"));
                replays += usize::from(name.contains(".replay"));
                for line in tape.iter().filter(|l| l.contains(": checkpointed every")) {
                    loops += 1;
                    let (_, rest) = line.split_once("each snapshot pushes").expect("snapshot");
                    let (state, replay) = rest.split_once("with @").expect("replay");
                    let replay = replay.split(';').next().unwrap_or(replay);
                    // (The optimiser may fold the loop that does not record
                    // away, when the direct path always runs.)
                    let folded = state.contains("(no longer pushed");
                    for v in state
                        .split_whitespace()
                        .filter(|w| w.starts_with('%') && !folded)
                    {
                        let v = v.trim_end_matches(',');
                        assert!(func.contains(&format!("call push({v})")), "{what}: {line}");
                    }
                    assert!(dump.contains(&format!("func @{replay}(")), "{what}: {line}");
                }
            }
        }
    }
    assert!(
        replays > 10 && loops > 10,
        "{replays} replay tapes, {loops} loops"
    );
    // What grad compiles under a limit is what the dump shows.
    let path = "benches/programs/lotka_volterra_steps.irad";
    let src = source(path);
    let m = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &m, "lotka_volterra_steps").expect("the function");
    let args =
        irad::parse_args(&Source::new("<args>", "1.5, 1.0, 3.0, 1.0, 100"), &m, f).expect("args");
    let mut req = GradRequest::new(f, &args);
    req.opts.tape_limit = Some(1024);
    let (_, built) = irad::grad(&src, &m, &irad::rules::Registry::new(), &req).expect("grad");
    let dump = succeeds(&["dump", path, "--mode", "rev", "--tape-limit", "1K"]);
    assert!(dump.contains(".replay2("), "{dump}");
    assert_printed(&dump, &derived(&m, &built), path);
}
