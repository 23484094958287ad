//! Control-flow graphs as Graphviz DOT, for `irad dump --format dot`.
//!
//! One cluster per function, one node per block labelled with the block's
//! printed statements, one edge per CFG edge (`gotoifnot` edges are labelled
//! `true` for the fall-through and `false` for the jump, `switch` edges with
//! their index). Input: a module whose
//! blocks all have terminators (a verified module). Output: a DOT digraph.

use irad_ir::text::{Line, func_lines};
use irad_ir::{Block, FuncId, Module, Terminator};
use std::fmt::Write;

/// The CFGs of `funcs` (all functions when empty) as one DOT digraph.
///
/// ```
/// let src = irad::Source::new("a.irad", "fn a(x: f64) -> f64 { if x < 0.0 { -x } else { x } }");
/// let m = irad::load(&src)?;
/// let dot = irad::dot::module_to_dot(&m, &[]);
/// assert!(dot.starts_with("digraph irad {"));
/// assert!(dot.contains("->"), "{dot}");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn module_to_dot(module: &Module, funcs: &[FuncId]) -> String {
    let ids: Vec<FuncId> = if funcs.is_empty() {
        module.func_ids().collect()
    } else {
        funcs.to_vec()
    };
    let mut out = String::from("digraph irad {\n  node [shape=box, fontname=\"monospace\"];\n");
    for (n, &id) in ids.iter().enumerate() {
        func_to_dot(module, id, n, &mut out);
    }
    out.push_str("}\n");
    out
}

fn func_to_dot(module: &Module, id: FuncId, n: usize, out: &mut String) {
    let func = &module[id];
    let mut labels: Vec<(Block, String)> = Vec::new();
    let mut header = String::new();
    for (line, text) in func_lines(module, id) {
        match line {
            Line::Header => header = text,
            Line::Label(b) => labels.push((b, format!("{text}\\l"))),
            Line::Inst(_) | Line::Term(_) => {
                if let Some((_, l)) = labels.last_mut() {
                    l.push_str(&escape(&text));
                    l.push_str("\\l");
                }
            }
            Line::End => {}
        }
    }
    let node = |b: Block| format!("f{n}_b{}", b.as_u32());
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "  subgraph cluster_{n} {{\n    label=\"{}\";",
        escape(&header)
    );
    for (b, label) in &labels {
        let _ = writeln!(out, "    {} [label=\"{label}\"];", node(*b));
    }
    for (i, &b) in func.layout.iter().enumerate() {
        match &func.blocks[b].term {
            Some(Terminator::Goto(t)) => {
                let _ = writeln!(out, "    {} -> {};", node(b), node(*t));
            }
            Some(Terminator::GotoIfNot { target, .. }) => {
                if let Some(&next) = func.layout.get(i + 1) {
                    let _ = writeln!(out, "    {} -> {} [label=\"true\"];", node(b), node(next));
                }
                let _ = writeln!(
                    out,
                    "    {} -> {} [label=\"false\"];",
                    node(b),
                    node(*target)
                );
            }
            Some(Terminator::Switch { targets, .. }) => {
                for (k, t) in targets.iter().enumerate() {
                    let _ = writeln!(out, "    {} -> {} [label=\"{k}\"];", node(b), node(*t));
                }
            }
            Some(Terminator::Return(_)) | None => {}
        }
    }
    out.push_str("  }\n");
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
