//! Text on the page: escaping (XML, [`crate::escape::xml`]), coordinates, wrapping and shortening
//! to a width.

use crate::font;

pub(super) use crate::escape::xml as esc;

/// Trim a float for SVG coordinates (two decimals are far below a printer's dot).
pub(super) fn c(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Split `text` into lines no wider than `width` at `size`: between the items of a `; ` list
/// where possible (a name stays on one line), else at spaces.
pub(super) fn wrap(text: &str, width: f64, size: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    let items: Vec<String> = text
        .split("; ")
        .enumerate()
        .map(|(i, item)| {
            if i == 0 {
                item.to_string()
            } else {
                format!("; {item}")
            }
        })
        .collect();
    for item in items {
        if font::width(&format!("{cur}{item}"), size) <= width {
            cur.push_str(&item);
            continue;
        }
        if !cur.is_empty() && font::width(item.trim_start_matches("; "), size) <= width {
            lines.push(std::mem::take(&mut cur) + ";");
            cur = item.trim_start_matches("; ").to_string();
            continue;
        }
        // An item longer than a line: break it at spaces.
        for word in item.split(' ') {
            let trial = if cur.is_empty() {
                word.to_string()
            } else {
                format!("{cur} {word}")
            };
            if font::width(&trial, size) > width && !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
                cur = word.to_string();
            } else {
                cur = trial;
            }
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// Shorten `text` with "…" until it is at most `width` wide at `size`.
pub(super) fn fit_text(text: &str, width: f64, size: f64) -> String {
    if font::width(text, size) <= width {
        return text.to_string();
    }
    let mut chars: Vec<char> = text.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let t: String = chars.iter().collect::<String>() + "…";
        if font::width(&t, size) <= width {
            return t;
        }
    }
    String::new()
}
