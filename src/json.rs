//! Values as JSON for `--json` output (SYNTAX.md §3): arrays and tuples as
//! JSON arrays, non-finite floats as the strings `"inf"`, `"-inf"`, `"nan"`.
//!
//! Assumes nothing about the value. Guarantees: every value has a JSON form;
//! a function value names its function (`"@f"`), `"@?"` for a stale handle.

use irad_ir::interp::value::{ArrayData, Val};
use irad_ir::{FuncRef, Module};

/// A value as JSON, per SYNTAX.md §3: arrays and tuples as arrays, non-finite
/// floats as the strings `"inf"`, `"-inf"`, `"nan"`, unit as `null`, function
/// values as their `@name`, a dual as `{"primal": P, "tangents": [T, ...]}`,
/// a sparse handle as the string `"sparse#H"`.
///
/// ```
/// use irad::Val;
///
/// let m = irad::ir::Module::new();
/// let v = Val::Tuple(vec![Val::F64(1.5), Val::F64(f64::INFINITY), Val::I64(2)].into());
/// assert_eq!(irad::value_to_json(&v, &m).to_string(), r#"[1.5,"inf",2]"#);
/// ```
pub fn value_to_json(v: &Val, module: &Module) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Val::F64(x) => f64_to_json(*x),
        Val::I64(x) => J::from(*x),
        Val::Bool(x) => J::Bool(*x),
        Val::Unit => J::Null,
        Val::Tuple(elems) => J::Array(elems.iter().map(|e| value_to_json(e, module)).collect()),
        Val::Array(a) => J::Array(match &*a.0.borrow() {
            ArrayData::F64(xs) => xs.iter().map(|&x| f64_to_json(x)).collect(),
            ArrayData::I64(xs) => xs.iter().map(|&x| J::from(x)).collect(),
            ArrayData::Bool(xs) => xs.iter().map(|&x| J::Bool(x)).collect(),
            ArrayData::Sparse(xs) => xs
                .iter()
                .map(|&x| J::String(format!("sparse#{x}")))
                .collect(),
        }),
        // A handle of a run's sparse tangent builder (no longer valid).
        Val::Sparse(h) => J::String(format!("sparse#{h}")),
        Val::Func(FuncRef::Prim(p)) => J::String(format!("@{}", p.name())),
        Val::Func(FuncRef::User(id)) => J::String(format!(
            "@{}",
            module.get(*id).map_or("?", |f| f.name.as_str())
        )),
        Val::Dual(vals) => {
            let mut obj = serde_json::Map::new();
            if let Some((p, ts)) = vals.split_first() {
                obj.insert("primal".into(), value_to_json(p, module));
                obj.insert(
                    "tangents".into(),
                    J::Array(ts.iter().map(|t| value_to_json(t, module)).collect()),
                );
            }
            J::Object(obj)
        }
    }
}

fn f64_to_json(x: f64) -> serde_json::Value {
    match serde_json::Number::from_f64(x) {
        Some(n) => serde_json::Value::Number(n),
        None if x.is_nan() => "nan".into(),
        None if x > 0.0 => "inf".into(),
        None => "-inf".into(),
    }
}
