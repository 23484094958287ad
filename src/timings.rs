//! The stage timings of `irad grad --timings` as text and as JSON
//! (docs/cli.md, "Stage timings"): what [`irad_ir::timings`] recorded, one
//! line or one field per stage, in pipeline order, and their total.
//!
//! Assumes the recorder was turned on ([`irad_ir::timings::enable`]) before
//! the work measured. Guarantees: every stage of
//! [`Stage::ALL`](irad_ir::timings::Stage::ALL) appears, recorded or not (0).

pub use irad_ir::timings::{Stage, Timings, enable, reset, snapshot};

/// The timings as text: a `timings:` heading, then one line per stage and a
/// `total` line, each with the stage's time in milliseconds.
///
/// ```
/// let text = irad::timings::to_text(&irad::timings::Timings::default());
/// assert!(text.starts_with("timings:\n  parse"));
/// assert!(text.contains("  cranelift"));
/// assert!(text.ends_with("ms\n"));
/// ```
pub fn to_text(t: &Timings) -> String {
    let mut text = String::from("timings:\n");
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    for s in Stage::ALL {
        text.push_str(&format!("  {:<10} {:>10.3} ms\n", s.name(), ms(t.get(s))));
    }
    text.push_str(&format!("  {:<10} {:>10.3} ms\n", "total", ms(t.total())));
    text
}

/// The timings as one JSON object: each stage's name (and `total`) with its
/// time in seconds.
///
/// ```
/// let j = irad::timings::to_json(&irad::timings::Timings::default());
/// assert_eq!(j["parse"], 0.0);
/// assert!(j["total"].is_f64());
/// ```
pub fn to_json(t: &Timings) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for s in Stage::ALL {
        map.insert(s.name().into(), t.get(s).as_secs_f64().into());
    }
    map.insert("total".into(), t.total().as_secs_f64().into());
    serde_json::Value::Object(map)
}
