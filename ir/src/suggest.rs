//! "Did you mean" suggestions for misspelled names: the closest candidate by
//! optimal-string-alignment distance (Levenshtein plus the swap of two
//! neighbouring characters), within a threshold that grows with the name's
//! length.
//!
//! Assumes nothing of the candidates (duplicates and the name itself are
//! fine). Guarantees: a suggestion differs from the name, is within
//! `max(len, 3) / 3` edits of it (so one edit for names up to five
//! characters, as rustc does), and is the first candidate at the smallest
//! distance, so callers list the likeliest kinds of names first. Names of one
//! character get no suggestion: every other one-character name is one edit
//! away.

/// The candidate closest to `name`, if one is close enough.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = name.chars().count();
    if len < 2 {
        return None;
    }
    let limit = len.max(3) / 3;
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == name || c.is_empty() {
            continue;
        }
        let d = distance(name, c);
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// `"; did you mean `{prefix}{c}`?"` for the closest candidate, or "".
pub fn did_you_mean<'a>(
    name: &str,
    prefix: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    closest(name, candidates).map_or_else(String::new, |c| format!("; did you mean `{prefix}{c}`?"))
}

/// The optimal-string-alignment distance of `a` and `b`, over characters.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the dynamic programme: i - 2, i - 1 and i.
    let mut prev2 = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(prev2[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("sinn", "sin"), 1);
        assert_eq!(distance("snI", "sin"), 2);
        assert_eq!(distance("cso", "cos"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions() {
        let names = ["sin", "cos", "exp", "sqrt"];
        assert_eq!(closest("sinn", names), Some("sin"));
        assert_eq!(closest("cso", names), Some("cos"));
        assert_eq!(closest("sqtr", names), Some("sqrt"));
        assert_eq!(closest("log", names), None);
        assert_eq!(closest("s", names), None);
        assert_eq!(closest("sin", names), None);
        assert_eq!(did_you_mean("ecp", "@", names), "; did you mean `@exp`?");
        assert_eq!(did_you_mean("zzz", "", names), "");
    }
}
