//! Splitting huge blocks (`irad_passes::split`) changes where statements
//! run, never what they compute: with small limits, programs with loops,
//! phis, values used by other blocks and by terminators, several results
//! per stretch, arrays written in place and run-time errors give the same
//! values (bit for bit), the same arrays after the call and the same errors
//! in the interpreter after the split as before; the result verifies and
//! prints as text that parses back; stretches that would take or return too
//! many values stay in their block.

use irad_ir::interp::{RunOptions, Val, run};
use irad_ir::text::{parse_module, print_module};
use irad_ir::verify::verify_module;
use irad_ir::{FuncId, Module};
use irad_passes::split::{MAX_LIVE, split_huge_blocks_at};

fn parse(src: &str) -> Module {
    let m = parse_module(src);
    assert!(m.is_ok(), "{m:?}");
    let m = m.unwrap_or_default();
    assert!(verify_module(&m).is_ok());
    m
}

fn func(m: &Module, name: &str) -> FuncId {
    m.by_name(name)
        .unwrap_or_else(|| unreachable!("no function {name}"))
}

/// The value (or error text) and the arguments after the call, as text.
fn outcome(m: &Module, f: FuncId, args: &[Val]) -> String {
    let args: Vec<Val> = args.to_vec();
    let r = run(m, f, &args, &RunOptions::default());
    let after: Vec<String> = args.iter().map(|a| a.display(m)).collect();
    match r {
        Ok(v) => format!("{} | {}", v.display(m), after.join(", ")),
        // The place in the IR names the part a statement moved to; the
        // message and the source position must not change.
        Err(e) => format!("error: {} at {:?} | {}", e.msg, e.loc.pos, after.join(", ")),
    }
}

/// A fresh array of `xs`.
fn array(xs: &[f64]) -> Val {
    Val::f64_array(xs.to_vec())
}

/// Splits `name` of `src` at `limit`, checks the module verifies and prints
/// as text that parses back and prints the same, and that every call that
/// `calls` makes (fresh arrays each time it is called) gives the same
/// outcome before and after; returns the number of functions added.
fn same_after_split(
    src: &str,
    name: &str,
    limit: usize,
    calls: &dyn Fn() -> Vec<Vec<Val>>,
) -> usize {
    let before = parse(src);
    let f = func(&before, name);
    let mut after = before.clone();
    let added = split_huge_blocks_at(&mut after, &[f], limit);
    let added = added.unwrap_or_else(|e| unreachable!("split failed: {e}"));
    let errors = verify_module(&after);
    assert!(errors.is_ok(), "{errors:?}\n{}", print_module(&after));
    let text = print_module(&after);
    let again = parse(&text);
    assert_eq!(print_module(&again), text);
    // Arrays are shared by reference: each side gets its own.
    for (want, got) in calls().iter().zip(calls()) {
        let want = outcome(&before, f, want);
        let got = outcome(&after, f, &got);
        assert_eq!(got, want, "{}", print_module(&after));
    }
    added.len()
}

/// Straight-line code with several values live across the cuts, a value
/// used by the terminator and one used by another block, a loop with phis
/// after it.
const MIXED: &str = "func @f(%x: f64, %n: i64) -> f64 {
#1:
  %a = call mul(%x, 2.0) :: f64
  %b = call sin(%a) :: f64
  %c = call add(%a, %b) :: f64
  %d = call mul(%c, %x) :: f64
  %e = call cos(%d) :: f64
  %g = call add(%e, %b) :: f64
  %h = call mul(%g, %a) :: f64
  %k = call sub(%h, %c) :: f64
  %p = call lt(%k, 100.0) :: bool
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %s = phi [#1 => %k, #3 => %s1] :: f64
  %t = call lt(%i, %n) :: bool
  gotoifnot %t, #4
#3:
  %u = call mul(%s, 0.5) :: f64
  %v = call add(%u, %d) :: f64
  %w = call sin(%v) :: f64
  %z = call add(%w, %g) :: f64
  %s1 = call mul(%z, 1.0001) :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  %r = call select(%p, %s, %h) :: f64
  return %r
}
";

#[test]
fn split_blocks_compute_the_same_values() {
    let calls = || -> Vec<Vec<Val>> {
        [(0.3, 0), (0.3, 5), (-1.7, 3), (f64::NAN, 2), (1e300, 4)]
            .iter()
            .map(|&(x, n)| vec![Val::F64(x), Val::I64(n)])
            .collect()
    };
    for limit in [1, 2, 3, 4, 5, 8] {
        let added = same_after_split(MIXED, "f", limit, &calls);
        assert!(added > 0, "limit {limit}: nothing split");
    }
    // At the limit of the biggest block nothing is split.
    assert_eq!(same_after_split(MIXED, "f", 9, &calls), 0);
}

#[test]
fn parts_take_and_return_what_their_stretch_needs() {
    let mut m = parse(MIXED);
    let f = func(&m, "f");
    let added = split_huge_blocks_at(&mut m, &[f], 3);
    let added = added.unwrap_or_else(|e| unreachable!("{e}"));
    // Block #1 (9 statements) in three stretches, block #3 (6) in two.
    assert_eq!(added.len(), 5, "{}", print_module(&m));
    let text = print_module(&m);
    // The first stretch (a, b, c) takes x and returns a, b, c (all used
    // later), as a tuple taken apart by `getfield`.
    assert!(
        text.contains("func @f.part0(%x: f64) -> (f64, f64, f64) {"),
        "{text}"
    );
    assert!(
        text.contains("invoke @f.part0(%x) :: (f64, f64, f64)"),
        "{text}"
    );
    assert!(text.contains("call getfield("), "{text}");
    // The stretch of the loop's body that ends with `%s1` and `%i1`.
    let parts: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("func @f.part"))
        .collect();
    assert_eq!(parts.len(), 5, "{text}");
}

/// A block that makes an array, writes it in place, reads it back and
/// reads outside it when `%j` is out of range: the error names the same
/// place after the split.
const ARRAYS: &str = "func @g(%a: [f64], %x: f64, %j: i64) -> f64 {
#1:
  %b = call zeros(3) :: [f64]
  %y = call mul(%x, 3.0) :: f64
  call arrayset(%a, 0, %y)
  call arrayset(%b, 1, %x)
  %q = call arrayref(%a, 1) :: f64
  %r = call add(%q, %y) :: f64
  call arrayset(%a, 2, %r)
  %e = call arrayref(%b, %j) :: f64
  %t = call add(%e, %r) :: f64
  call arrayset(%b, 0, %t)
  %o = call arrayref(%b, 0) :: f64
  %z = call mul(%o, %e) :: f64
  return %z
}
";

#[test]
fn arrays_written_in_place_and_errors_are_the_same() {
    let calls = || -> Vec<Vec<Val>> {
        [0, 1, 2, 3, 4, -1]
            .iter()
            .map(|&j| vec![array(&[1.0, 2.0, 3.0]), Val::F64(0.25), Val::I64(j)])
            .collect()
    };
    let mut errors = 0;
    for args in &calls() {
        let m = parse(ARRAYS);
        if outcome(&m, func(&m, "g"), args).starts_with("error:") {
            errors += 1;
        }
    }
    assert_eq!(errors, 3, "indices 3, 4 and -1 are out of range");
    for limit in [1, 2, 3, 4, 6] {
        assert!(same_after_split(ARRAYS, "g", limit, &calls) > 0);
    }
}

#[test]
fn stretches_needing_too_many_values_stay_in_their_block() {
    // MAX_LIVE + 8 values defined, then all summed: a cut after the
    // definitions would return them all.
    let n = MAX_LIVE + 8;
    let mut src = String::from("func @h(%x: f64) -> f64 {\n#1:\n");
    for i in 0..n {
        src.push_str(&format!("  %v{i} = call mul(%x, {}.0) :: f64\n", i + 1));
    }
    src.push_str("  %s0 = call add(%v0, 0.0) :: f64\n");
    for i in 1..n {
        src.push_str(&format!("  %s{i} = call add(%s{}, %v{i}) :: f64\n", i - 1));
    }
    src.push_str(&format!("  return %s{}\n}}\n", n - 1));
    let calls = || vec![vec![Val::F64(0.1)], vec![Val::F64(-3.5)]];
    // Halves: the first would return all the v's; the second takes them.
    let mut m = parse(&src);
    let f = func(&m, "h");
    let added = split_huge_blocks_at(&mut m, &[f], n);
    assert_eq!(added.map(|a| a.len()).ok(), Some(0), "{}", print_module(&m));
    // Small stretches each take and return few values: split.
    assert!(same_after_split(&src, "h", 4, &calls) > 0);
}
