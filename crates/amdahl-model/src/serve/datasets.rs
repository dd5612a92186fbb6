//! Named length data sets for generated workloads (`--input-dist sharegpt`, …): the published
//! mean prompt and output lengths of public data sets (data/serve_datasets.csv, with sources),
//! drawn log-normal around that mean. The sources publish means only; the σ of the logarithm in
//! the file is an assumption and says so, except for OpenOrca's outputs, whose σ is measured from
//! the token counts MLPerf submitters publish (their TEST06 compliance logs).

use super::lengths::Lengths;

const DATA: &str = include_str!("../../../../data/serve_datasets.csv");

/// The names the file holds, for error messages (a test checks they agree with the file).
pub const NAMES: [&str; 4] = ["sharegpt", "lmarena", "cnn-dailymail", "openorca"];

/// Which side of a request a distribution draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Input,
    Output,
}

/// One data set's statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub name: String,
    pub input: Lengths,
    pub output: Lengths,
    pub source: String,
    pub year: u32,
}

impl Dataset {
    pub fn lengths(&self, side: Side) -> Lengths {
        match side {
            Side::Input => self.input,
            Side::Output => self.output,
        }
    }
}

/// Every data set of the embedded file. The file is ours and checked by the tests below, so a
/// malformed row is skipped rather than reported (it cannot reach a user).
pub fn all() -> Vec<Dataset> {
    let mut rdr = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(DATA.as_bytes());
    let Ok(headers) = rdr.headers().cloned() else {
        return Vec::new();
    };
    let col = |name: &str| headers.iter().position(|h| h == name);
    rdr.records()
        .filter_map(Result::ok)
        .filter_map(|r| {
            let get = |name: &str| col(name).and_then(|i| r.get(i)).unwrap_or("");
            let side = |prefix: &str| -> Option<Lengths> {
                let num = |what: &str| get(&format!("{prefix}_{what}")).parse::<f64>().ok();
                let max = get(&format!("{prefix}_max")).parse::<u32>().ok();
                Some(Lengths::LogNormal {
                    mean: num("mean")?,
                    sigma: num("sigma")?,
                    max,
                })
            };
            Some(Dataset {
                name: get("name").to_string(),
                input: side("input")?,
                output: side("output")?,
                source: get("source").to_string(),
                year: get("year").parse().ok()?,
            })
        })
        .collect()
}

/// The data set named `name` (case-insensitive), if any.
pub fn find(name: &str) -> Option<Dataset> {
    all()
        .into_iter()
        .find(|d| d.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_holds_the_named_sets_with_sources() {
        let sets = all();
        let names: Vec<&str> = sets.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, NAMES);
        for d in &sets {
            assert!(!d.source.is_empty() && d.year >= 2017, "{}", d.name);
            assert!(
                d.input.mean() >= 1.0 && d.output.mean() >= 1.0,
                "{}",
                d.name
            );
        }
        // LMSYS-Chat-1M, Table 1: 69.5 tokens per prompt, 214.5 per response.
        let lm = find("LMArena").unwrap();
        assert_eq!((lm.input.mean(), lm.output.mean()), (69.5, 214.5));
    }
}
