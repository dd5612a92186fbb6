//! "Did you mean" suggestions by edit distance.

/// Levenshtein distance between two strings, by characters (two-row dynamic programme).
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The (up to) three candidates nearest to `query`, compared case-insensitively; a candidate that
/// contains the query as a substring counts as near. Deduplicated, best first.
pub(crate) fn nearest<'a>(
    query: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let q = query.to_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| {
            let lc = c.to_lowercase();
            let d = if !q.is_empty() && lc.contains(&q) {
                lc.len().saturating_sub(q.len()).min(1)
            } else {
                distance(&q, &lc)
            };
            (d, c)
        })
        .collect();
    scored.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)));
    let limit = (q.chars().count() / 2).max(2);
    let mut out: Vec<String> = Vec::new();
    for (d, c) in scored {
        if d > limit || out.len() == 3 {
            break;
        }
        if !out.iter().any(|o| o.eq_ignore_ascii_case(c)) {
            out.push(c.to_string());
        }
    }
    out
}

/// The tail of an "unknown name" message.
pub(crate) fn render(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        "; run `amdahl catalog` to list the known names".into()
    } else {
        format!("; did you mean {}?", suggestions.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levenshtein_known_values() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("h100", "h100"), 0);
    }

    #[test]
    fn nearest_finds_typos() {
        let s = nearest("frnce", ["France", "Finland", "Mexico"]);
        assert_eq!(s.first().map(String::as_str), Some("France"));
    }

    proptest::proptest! {
        #[test]
        fn distance_is_a_metric(a in "[a-z]{0,8}", b in "[a-z]{0,8}", c in "[a-z]{0,8}") {
            proptest::prop_assert_eq!(distance(&a, &b), distance(&b, &a));
            proptest::prop_assert!(distance(&a, &c) <= distance(&a, &b) + distance(&b, &c));
            proptest::prop_assert_eq!(distance(&a, &a), 0);
        }
    }
}
