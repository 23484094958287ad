//! Byte sizes as the command line writes them (`--tape-limit SIZE`): a
//! decimal count of bytes, optionally followed by `K`, `M`, `G` or `T`
//! (either case) for that many kibibytes, mebibytes, gibibytes or
//! tebibytes: `65536`, `64M`, `1G`.
//!
//! Assumes nothing about the text. Guarantees: the result is at least 1 and
//! fits a `u64`; anything else is an error message naming the text and what
//! is expected (the CLI adds the option and exits with status 2).

/// The size `text` writes, in bytes (see the module header).
///
/// ```
/// assert_eq!(irad::parse_size("64M"), Ok(64 << 20));
/// assert_eq!(irad::parse_size("65536"), Ok(65536));
/// assert!(irad::parse_size("1.5G").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "`{text}` is not a size (expected a whole number of bytes, optionally followed by K, M, G or T, like 64M)"
        )
    };
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((at, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(bad()),
            };
            (&t[..at], shift)
        }
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let bytes = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{text}` is too large a size (at most 2^64 - 1 bytes)"))?;
    if bytes == 0 {
        return Err(format!(
            "`{text}` is not a size: a tape limit is at least 1 byte"
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_read_with_their_suffixes() {
        for (text, want) in [
            ("65536", 65536),
            ("64M", 64 << 20),
            ("64m", 64 << 20),
            ("1G", 1 << 30),
            ("3k", 3 << 10),
            ("2T", 2u64 << 40),
            (" 1 ", 1),
        ] {
            assert_eq!(parse_size(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_sizes_are_refused_with_a_message() {
        for text in [
            "",
            "M",
            "1.5G",
            "-1",
            "64MB",
            "0",
            "0K",
            "12Q",
            "99999999999999999999",
        ] {
            let e = parse_size(text).expect_err(text);
            assert!(e.contains(&format!("`{text}`")), "{text}: {e}");
        }
        assert!(parse_size("20000000T").is_err_and(|e| e.contains("too large")));
    }
}
