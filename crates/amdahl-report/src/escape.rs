//! Escaping, one function per target format: every renderer that writes text into markup or an
//! exposition format goes through these, so a format's rules live in one place.
//!
//! CSV files are written with the `csv` crate (which quotes as RFC 4180 says), except a few
//! written by hand whose fields are numbers and names amdahl generates; the model and system
//! names among them (from catalogs a user may extend) go through [`csv_unquoted`]. Markdown output
//! (the energy statement) is prose amdahl writes itself and is not escaped.

/// XML character data and double-quoted attribute values (SVG): `&`, `<`, `>` and `"`.
pub fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// HTML element content and attribute values, in either kind of quotes: [`xml`] and `'`.
pub fn html(s: &str) -> String {
    xml(s).replace('\'', "&#39;")
}

/// A label value as the Prometheus text exposition format needs it: `\`, `"` and newlines
/// escaped (OpenMetrics 1.0, "Escaping"). `prometheus-client` 0.23 writes label values verbatim,
/// and a process name may contain any of these.
pub fn prometheus_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// LaTeX's special characters in running text.
pub fn latex(t: &str) -> String {
    let mut o = String::with_capacity(t.len());
    for c in t.chars() {
        match c {
            '\\' => o.push_str("\\textbackslash{}"),
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                o.push('\\');
                o.push(c);
            }
            '~' => o.push_str("\\textasciitilde{}"),
            '^' => o.push_str("\\textasciicircum{}"),
            _ => o.push(c),
        }
    }
    o
}

/// A free-text field of a CSV row written without quoting: commas become spaces, so the row keeps
/// its number of columns.
pub fn csv_unquoted(s: &str) -> String {
    s.replace(',', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_double_quotes_only() {
        assert_eq!(
            xml(r#"a<b & "c" 'd'>"#),
            "a&lt;b &amp; &quot;c&quot; 'd'&gt;"
        );
    }

    #[test]
    fn html_also_escapes_single_quotes() {
        assert_eq!(
            html(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn prometheus_labels_escape_backslash_quote_and_newline() {
        assert_eq!(prometheus_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn latex_escapes_specials() {
        assert_eq!(
            latex(r"50% of $5 & a_b {x} ~^\"),
            r"50\% of \$5 \& a\_b \{x\} \textasciitilde{}\textasciicircum{}\textbackslash{}"
        );
    }

    #[test]
    fn unquoted_csv_fields_lose_their_commas() {
        assert_eq!(csv_unquoted("Llama 3, 8B"), "Llama 3  8B");
    }
}
