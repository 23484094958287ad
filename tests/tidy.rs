//! House-style checks over the source tree (STYLE.md): every Rust file of every
//! crate (and of the tests, benches, examples and fuzz targets) opens with a
//! `//!` comment saying what it does, assumes and guarantees, and no function
//! in any workspace crate's `src/` is longer than [`MAX_FN_LINES`] lines.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && name != "target" && !name.to_string_lossy().starts_with('.') {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_comment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src", "tests", "benches", "examples", "ir", "rules", "passes", "codegen", "runtime",
        "kernels", "fuzzgen", "fuzz",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {} Rust files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|f| f.strip_prefix(root).unwrap_or(f).display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` header: {missing:?}"
    );
}

/// The longest a function in any crate's `src/` may be (STYLE.md: a function
/// past ~250 lines is a sign that phases want to be functions).
const MAX_FN_LINES: usize = 250;

/// `text` with comments, string literals and character literals blanked out
/// (newlines kept), so braces inside them do not count.
fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let blank = |b: u8| if b == b'\n' { b'\n' } else { b' ' };
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < bytes.len() {
                if bytes[i..].starts_with(b"/*") {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if bytes[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(bytes[i]));
                    i += 1;
                }
            }
        } else if bytes[i] == b'r'
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'))
            && rest[1..].iter().take_while(|&&b| b == b'#').count() + 1 < rest.len()
            && rest[1 + rest[1..].iter().take_while(|&&b| b == b'#').count()] == b'"'
        {
            let hashes = rest[1..].iter().take_while(|&&b| b == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let start = i + 2 + hashes;
            let end = bytes[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(bytes.len(), |p| start + p + close.len());
            out.extend(bytes[i..end].iter().map(|&b| blank(b)));
            i = end;
        } else if bytes[i] == b'"' {
            out.push(b' ');
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                let step = if bytes[i] == b'\\' { 2 } else { 1 };
                for k in 0..step.min(bytes.len() - i) {
                    out.push(blank(bytes[i + k]));
                }
                i += step;
            }
            out.push(b' ');
            i += 1;
        } else if bytes[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let len = if rest.get(1) == Some(&b'\\') {
                rest[2..].iter().position(|&b| b == b'\'').map(|p| p + 3)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + ch) == Some(&b'\'')).then_some(ch + 2)
            };
            let len = len.unwrap_or(1).min(rest.len());
            out.extend(rest[..len].iter().map(|&b| blank(b)));
            i += len;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `(lines, first line, name)` of every function with a body in `code`
/// (already stripped by [`code_only`]).
fn function_lengths(code: &str) -> Vec<(usize, usize, String)> {
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let line_of = |pos: usize| code[..pos].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].find("fn ") {
        let at = i + p;
        i = at + 3;
        if at > 0 && is_ident(bytes[at - 1]) {
            continue;
        }
        let name: String = code[at + 3..]
            .trim_start()
            .chars()
            .take_while(|&c| c.is_alphanumeric() || c == '_')
            .collect();
        if name.is_empty() {
            continue; // `fn(` types
        }
        // The body opens at the first `{` outside parentheses, unless a `;`
        // ends a declaration first.
        let mut depth = 0i32;
        let mut open = None;
        for (k, &b) in bytes[at..].iter().enumerate() {
            match b {
                b'(' | b'[' | b'<' => depth += 1,
                b')' | b']' => depth -= 1,
                b'>' if bytes[at + k - 1] != b'-' && bytes[at + k - 1] != b'=' => depth -= 1,
                b';' if depth <= 0 => break,
                b'{' if depth <= 0 => {
                    open = Some(at + k);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut braces = 0i32;
        let mut close = bytes.len();
        for (k, &b) in bytes[open..].iter().enumerate() {
            match b {
                b'{' => braces += 1,
                b'}' => {
                    braces -= 1;
                    if braces == 0 {
                        close = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let (first, last) = (line_of(at), line_of(close));
        found.push((last - first + 1, first, name));
    }
    found
}

#[test]
fn the_length_scanner_measures_functions_and_ignores_strings_and_comments() {
    let text = "fn a() {\n    let s = \"}\"; // }\n    let c = '}';\n}\n\
                trait T { fn decl(&self) -> u8; }\n\
                fn b<'x>(v: &'x [u8]) -> Vec<u8> where u8: Copy {\n    /* { */ v.to_vec()\n}\n";
    let lengths = function_lengths(&code_only(text));
    assert_eq!(
        lengths,
        vec![(4, 1, "a".to_string()), (3, 6, "b".to_string())]
    );
}

/// The source directory of every crate of the workspace (the facade's first).
const CRATE_SOURCES: &[&str] = &[
    "src",
    "ir/src",
    "rules/src",
    "passes/src",
    "codegen/src",
    "runtime/src",
    "kernels/src",
    "fuzzgen/src",
];

#[test]
fn the_length_check_covers_every_workspace_member() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let members = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .and_then(|l| l.strip_suffix(']'))
        .unwrap_or_default();
    let members: Vec<&str> = members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .collect();
    assert!(members.len() > 5, "no workspace members found: {members:?}");
    for member in members {
        let src = if member == "." {
            "src".to_string()
        } else {
            format!("{member}/src")
        };
        assert!(
            CRATE_SOURCES.contains(&src.as_str()),
            "workspace member {member} is not in CRATE_SOURCES"
        );
    }
}

#[test]
fn no_function_in_any_crate_is_too_long() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in CRATE_SOURCES {
        let before = files.len();
        rust_files(&root.join(dir), &mut files);
        assert!(files.len() > before, "no Rust files in {dir}");
    }
    assert!(files.len() > 20, "found only {} Rust files", files.len());
    let mut long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (lines, line, name) in function_lengths(&code_only(&text)) {
            if lines > MAX_FN_LINES {
                let path = file
                    .strip_prefix(root)
                    .unwrap_or(file)
                    .display()
                    .to_string();
                long.push(format!("{path}:{line} `{name}` has {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into phases): {long:#?}"
    );
}
