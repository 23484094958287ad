//! The printer of IR text (SYNTAX.md §1): [`Module`] to text.
//!
//! Assumes nothing: a function that does not verify (missing terminators,
//! invalid handles, overloaded primitives as values) still prints, with `?` in
//! place of what cannot be named, so the verifier can show it. Guarantees: the
//! output of a well-formed module parses back to a structurally equal module
//! (see `eq::structural_eq`) and prints again to the same text. Value names are
//! kept when valid and unique in their function; other values get decimal
//! names, chosen in definition order (parameters, then statements in layout
//! order) so that they collide with no name of the function.
//!
//! One thing the text cannot say: a primitive used as a value (`@sin`) in a
//! module that has a function of the same name prints as `@sin`, which reads
//! back as the module's function (SYNTAX.md: the module's function shadows).

use super::num::format_f64;
use crate::func::is_value_name;
use crate::func::{
    Block, Const, Func, FuncId, FuncRef, Inst, InstKind, Module, Operand, Terminator, Value,
    ValueDef,
};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// What a printed line of a function shows.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Line {
    /// `func @f(...) -> T {`
    Header,
    /// `#N:` of a block.
    Label(Block),
    /// A statement.
    Inst(Inst),
    /// The terminator of a block.
    Term(Block),
    /// The closing `}`.
    End,
}

/// The printed lines of function `f` (without newlines), each with what it shows;
/// empty when `m` has no function `f`.
pub fn func_lines(m: &Module, f: FuncId) -> Vec<(Line, String)> {
    let Some(func) = m.get(f) else {
        return Vec::new();
    };
    let printer = FuncPrinter {
        m,
        func,
        rules: m.declared_rules(f),
        names: value_names(func),
    };
    printer.lines()
}

/// The names (without `%`) that [`print_func`] gives the parameters and
/// statement results of function `f`; empty when `m` has no function `f`.
pub fn printed_names(m: &Module, f: FuncId) -> HashMap<Value, String> {
    m.get(f).map(value_names).unwrap_or_default()
}

/// Function `f` as text, ending in a newline; empty when `m` has no function `f`.
pub fn print_func(m: &Module, f: FuncId) -> String {
    let mut out = String::new();
    for (_, line) in func_lines(m, f) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The module as text: its functions in definition order, separated by blank lines.
pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    for (i, id) in m.func_ids().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&print_func(m, id));
    }
    out
}

struct FuncPrinter<'m> {
    m: &'m Module,
    func: &'m Func,
    /// The rules declared for the function (`jvp @g vjp @h` in its header).
    rules: crate::DeclaredRules,
    names: HashMap<Value, String>,
}

impl FuncPrinter<'_> {
    fn lines(&self) -> Vec<(Line, String)> {
        let func = self.func;
        let mut lines = Vec::new();
        let mut header = format!("func @{}(", func.name);
        for (i, &param) in func.params.iter().enumerate() {
            if i > 0 {
                header.push_str(", ");
            }
            let ty = func
                .values
                .get(param)
                .map_or("?".to_string(), |d| d.ty.to_string());
            let _ = write!(header, "{}: {ty}", self.value(param));
        }
        let _ = write!(header, ") -> {}", func.ret);
        for (word, rule) in [("jvp", self.rules.jvp), ("vjp", self.rules.vjp)] {
            if let Some(g) = rule {
                let name = self.m.get(g).map_or("?", |g| g.name.as_str());
                let _ = write!(header, " {word} @{name}");
            }
        }
        header.push_str(" {");
        lines.push((Line::Header, header));
        for &block in &func.layout {
            let Some(data) = func.blocks.get(block) else {
                continue;
            };
            lines.push((Line::Label(block), format!("#{}:", data.label)));
            for &inst in &data.insts {
                lines.push((Line::Inst(inst), self.inst(inst)));
            }
            if let Some(term) = &data.term {
                lines.push((Line::Term(block), self.term(term)));
            }
        }
        lines.push((Line::End, "}".to_string()));
        lines
    }

    fn value(&self, v: Value) -> String {
        match self.names.get(&v) {
            Some(name) => format!("%{name}"),
            None => format!("%?{}", v.as_u32()),
        }
    }

    fn block(&self, b: Block) -> String {
        match self.func.blocks.get(b) {
            Some(data) => format!("#{}", data.label),
            None => format!("#?{}", b.as_u32()),
        }
    }

    fn operand(&self, op: &Operand) -> String {
        match op {
            Operand::Value(v) => self.value(*v),
            Operand::Const(c) => self.constant(c),
        }
    }

    fn constant(&self, c: &Const) -> String {
        match c {
            Const::F64(x) => format_f64(*x),
            Const::I64(x) => x.to_string(),
            Const::Bool(b) => b.to_string(),
            Const::Unit => "()".to_string(),
            Const::Func(FuncRef::Prim(p)) => format!("@{}", p.name()),
            Const::Func(FuncRef::User(id)) => match self.m.get(*id) {
                Some(f) => format!("@{}", f.name),
                None => format!("@?{}", id.as_u32()),
            },
        }
    }

    fn args(&self, args: &[Operand]) -> String {
        let parts: Vec<String> = args.iter().map(|a| self.operand(a)).collect();
        format!("({})", parts.join(", "))
    }

    fn inst(&self, inst: Inst) -> String {
        let Some(data) = self.func.insts.get(inst) else {
            return format!("  ?{}", inst.as_u32());
        };
        let rhs = match &data.kind {
            InstKind::Prim { prim, args } => format!("call {}{}", prim.name(), self.args(args)),
            InstKind::Invoke { func, args } => {
                let name = self.m.get(*func).map_or("?", |f| f.name.as_str());
                format!("invoke @{name}{}", self.args(args))
            }
            InstKind::CallValue { callee, args } => {
                format!("call {}{}", self.value(*callee), self.args(args))
            }
            InstKind::Phi { entries } => {
                let parts: Vec<String> = entries
                    .iter()
                    .map(|(b, op)| format!("{} => {}", self.block(*b), self.operand(op)))
                    .collect();
                format!("phi [{}]", parts.join(", "))
            }
        };
        match data.result {
            Some(v) => {
                let ty = self
                    .func
                    .values
                    .get(v)
                    .map_or("?".to_string(), |d| d.ty.to_string());
                format!("  {} = {rhs} :: {ty}", self.value(v))
            }
            None => format!("  {rhs}"),
        }
    }

    fn term(&self, term: &Terminator) -> String {
        match term {
            Terminator::Goto(b) => format!("  goto {}", self.block(*b)),
            Terminator::GotoIfNot { cond, target } => {
                format!(
                    "  gotoifnot {}, {}",
                    self.operand(cond),
                    self.block(*target)
                )
            }
            Terminator::Return(op) => format!("  return {}", self.operand(op)),
            Terminator::Switch { index, targets } => {
                let targets: Vec<String> = targets.iter().map(|b| self.block(*b)).collect();
                format!("  switch {}, [{}]", self.operand(index), targets.join(", "))
            }
        }
    }
}

/// The printed name of every value: kept when valid and unique in the function,
/// otherwise the first decimal number not used by any name of the function.
fn value_names(func: &Func) -> HashMap<Value, String> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for data in func.values.values() {
        if let Some(name) = data.name.as_deref() {
            *count.entry(name).or_default() += 1;
        }
    }
    // Definition order: parameters, statements in layout order, then the rest.
    let mut order: Vec<Value> = func.params.clone();
    for &block in &func.layout {
        let Some(data) = func.blocks.get(block) else {
            continue;
        };
        for &inst in &data.insts {
            if let Some(v) = func.insts.get(inst).and_then(|d| d.result) {
                order.push(v);
            }
        }
    }
    let mut seen: HashSet<Value> = order.iter().copied().collect();
    for (v, data) in func.values.iter() {
        if matches!(data.def, ValueDef::Param(_) | ValueDef::Inst(_)) && seen.insert(v) {
            order.push(v);
        }
    }
    let mut taken: HashSet<String> = count.keys().map(|n| n.to_string()).collect();
    let mut names = HashMap::new();
    let mut next = 0u64;
    for v in order {
        if names.contains_key(&v) {
            continue;
        }
        let own = func.values.get(v).and_then(|d| d.name.as_deref());
        let name = match own {
            Some(n) if is_value_name(n) && count.get(n) == Some(&1) => n.to_string(),
            _ => {
                while taken.contains(&next.to_string()) {
                    next += 1;
                }
                let fresh = next.to_string();
                taken.insert(fresh.clone());
                fresh
            }
        };
        names.insert(v, name);
    }
    names
}
