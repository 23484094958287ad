//! What a run of generated programs covered (`irad-fuzz TARGET --coverage`):
//! per feature the generator records ([`crate::generate::FEATURES`]:
//! statement kinds, helpers, parameters) and per primitive and statement
//! kind of the lowered IR (every primitive a user can write, `invoke`,
//! calls through function values, phis, branches), in how many programs it
//! occurs and how often in all.
//!
//! Assumes programs of [`crate::generate::program`]. Guarantees: the table
//! lists every feature and every primitive that is not internal to AD,
//! also those never seen (with 0), so gaps show; a program that does not
//! load counts as such and adds no IR counts.

use crate::generate::{FEATURES, Program};
use irad::ir::func::{InstKind, Terminator};
use irad::ir::prim::PRIMS;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Programs containing something, and its occurrences in all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Programs in which it occurs at least once.
    pub programs: u64,
    /// Occurrences over all programs.
    pub occurrences: u64,
}

/// Counts over a run; see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Coverage {
    /// Programs added.
    pub programs: u64,
    /// Programs that did not load (a generator bug).
    pub not_loaded: u64,
    /// By feature name.
    pub features: BTreeMap<&'static str, Count>,
    /// By IR primitive or statement kind (`invoke`, `call %f`, `phi`,
    /// `gotoifnot`).
    pub ir: BTreeMap<&'static str, Count>,
}

/// The IR's statement kinds besides primitives, as the table names them.
const IR_KINDS: [&str; 4] = ["invoke", "call %f (function value)", "phi", "gotoifnot"];

impl Coverage {
    /// Counts `p`: its recorded features, and what its lowered IR holds.
    pub fn add(&mut self, p: &Program) {
        self.programs += 1;
        let mut features: BTreeMap<&'static str, u64> = BTreeMap::new();
        for f in &p.features {
            *features.entry(f).or_default() += 1;
        }
        add_counts(&mut self.features, &features);
        let src = irad::Source::new("gen.irad", p.source.as_str());
        let Ok(module) = irad::load(&src) else {
            self.not_loaded += 1;
            return;
        };
        let mut ir: BTreeMap<&'static str, u64> = BTreeMap::new();
        for (_, func) in module.funcs() {
            for inst in func.insts.values() {
                let key = match &inst.kind {
                    InstKind::Prim { prim, .. } => prim.name(),
                    InstKind::Invoke { .. } => IR_KINDS[0],
                    InstKind::CallValue { .. } => IR_KINDS[1],
                    InstKind::Phi { .. } => IR_KINDS[2],
                };
                *ir.entry(key).or_default() += 1;
            }
            for block in func.blocks.values() {
                if let Some(Terminator::GotoIfNot { .. }) = block.term {
                    *ir.entry(IR_KINDS[3]).or_default() += 1;
                }
            }
        }
        add_counts(&mut self.ir, &ir);
    }

    /// Adds the counts of `other` (another worker's).
    pub fn merge(&mut self, other: &Coverage) {
        self.programs += other.programs;
        self.not_loaded += other.not_loaded;
        for (map, from) in [
            (&mut self.features, &other.features),
            (&mut self.ir, &other.ir),
        ] {
            for (k, c) in from {
                let e = map.entry(k).or_default();
                e.programs += c.programs;
                e.occurrences += c.occurrences;
            }
        }
    }

    /// The table: Markdown, one row per feature, then one per primitive and
    /// IR statement kind, with the share of programs.
    pub fn table(&self) -> String {
        let mut out = format!(
            "coverage of {} programs ({} did not load)\n\n",
            self.programs, self.not_loaded
        );
        let pct = |n: u64| 100.0 * n as f64 / self.programs.max(1) as f64;
        let mut section =
            |title: &str, keys: &[&'static str], map: &BTreeMap<&'static str, Count>| {
                let _ = writeln!(out, "| {title} | programs | % of programs | occurrences |");
                out.push_str("|---|---:|---:|---:|\n");
                for k in keys {
                    let c = map.get(k).copied().unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "| `{k}` | {} | {:.1} | {} |",
                        c.programs,
                        pct(c.programs),
                        c.occurrences
                    );
                }
                out.push('\n');
            };
        section("feature", FEATURES, &self.features);
        let mut ir: Vec<&'static str> = PRIMS
            .iter()
            .filter(|info| !info.prim.is_ad())
            .map(|info| info.name)
            .collect();
        ir.extend(IR_KINDS);
        section("IR primitive or statement", &ir, &self.ir);
        out
    }
}

fn add_counts(to: &mut BTreeMap<&'static str, Count>, program: &BTreeMap<&'static str, u64>) {
    for (&k, &n) in program {
        let e = to.entry(k).or_default();
        e.programs += 1;
        e.occurrences += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_features_and_primitives_of_programs() {
        let p = Program::from_text(
            "fn main(x0: f64, a: [f64]) -> f64 {\n    let mut s = 0.0;\n    for i in 0..len(a) {\n        s = s + sin(a[i]) * x0;\n    }\n    s + sum(a)\n}\n// args: 1.0, [2.0]\n",
        )
        .expect("a program with arguments");
        let mut one = Coverage::default();
        let p = Program {
            features: vec!["for", "assign", "assign"],
            ..p
        };
        one.add(&p);
        let mut all = Coverage::default();
        all.merge(&one);
        all.merge(&one);
        assert_eq!(all.programs, 2);
        assert_eq!(all.not_loaded, 0);
        let count = |programs, occurrences| Count {
            programs,
            occurrences,
        };
        assert_eq!(all.features["assign"], count(2, 4));
        assert_eq!(all.ir["sin"], count(2, 2));
        assert_eq!(all.ir["sum"], count(2, 2));
        assert!(all.ir["phi"].occurrences >= 4, "{:?}", all.ir);
        let table = all.table();
        assert!(table.contains("| `for` | 2 | 100.0 | 2 |"), "{table}");
        // Never seen: listed with 0.
        assert!(table.contains("| `matmul` | 0 | 0.0 | 0 |"), "{table}");
        assert!(
            table.contains("| `while-data-exit` | 0 | 0.0 | 0 |"),
            "{table}"
        );
        let bad = Program::from_text("fn main( {\n// args: 1.0\n").expect("text");
        all.add(&bad);
        assert_eq!(all.not_loaded, 1);
    }
}
