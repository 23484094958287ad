//! Floats as IR text writes them: the shortest form that reads back to the
//! same bits, always with a `.` or an exponent (`1.0`, `1e16`, `-0.0`, `nan`,
//! `inf`, `-inf`). The IR printer, value display, the interpreter's error
//! texts and the runtime's error texts all print floats through
//! [`format_f64`], so a number reads the same whichever backend reported it.

/// Formats `x` as an IR f64 literal that parses back to the same bits
/// (all NaNs print as `nan`).
pub fn format_f64(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // Rust's Debug form is the shortest round-tripping decimal and always has a
    // `.` or an exponent (`1.0`, `1e16`, `1.5e-7`).
    format!("{x:?}")
}

#[cfg(test)]
mod tests {
    use super::format_f64;

    #[test]
    fn shortest_round_trip_forms() {
        for (x, s) in [
            (1.0, "1.0"),
            (1e16, "1e16"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (-2.5e-3, "-0.0025"),
            (1e-7, "1e-7"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(format_f64(x), s);
            if !x.is_nan() {
                let back: f64 = s.parse().unwrap_or(f64::NAN);
                assert_eq!(back.to_bits(), x.to_bits(), "{s}");
            }
        }
    }
}
