//! "Did you mean" suggestions by edit distance.

/// Levenshtein distance between two strings, by characters (`strsim`, a well-kept crate, instead
/// of a hand-written dynamic programme).
pub(crate) fn distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
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

/// The `amdahl catalog` subcommand that lists the names of a kind (the CLI's `catalog` values).
fn listing(kind: &str) -> &'static str {
    match kind {
        "device" => "devices",
        "model" => "models",
        "PUE preset" => "pue",
        "validation run" => "validation",
        "server" => "servers",
        _ => "regions",
    }
}

/// The tail of an "unknown name" message: the nearest names, and the command that lists them all
/// (a bare `amdahl catalog` is a usage error: it needs the catalog's name).
pub(crate) fn render(kind: &str, suggestions: &[String]) -> String {
    let list = listing(kind);
    if suggestions.is_empty() {
        format!("; run `amdahl catalog {list}` to list the known names")
    } else {
        format!(
            "; did you mean {}? `amdahl catalog {list}` lists them all",
            suggestions.join(", ")
        )
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

    /// Regression: an unknown model said "run `amdahl catalog`", which fails without the
    /// catalog's name.
    #[test]
    fn unknown_name_hint_names_the_catalog_to_list() {
        assert_eq!(
            render("model", &[]),
            "; run `amdahl catalog models` to list the known names"
        );
        assert!(render("device", &["H100 SXM5 80GB".into()]).contains("`amdahl catalog devices`"));
        assert!(render("grid region", &[]).contains("`amdahl catalog regions`"));
        assert!(render("PUE preset", &[]).contains("`amdahl catalog pue`"));
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
