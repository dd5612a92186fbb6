//! How many "cores" TOP500 counts per accelerator, so `--n accelerators` can turn the column
//! "Accelerator/Co-Processor Cores" into a device count. The table is data
//! (`data/top500/accelerators.csv`), each row citing the vendor document it comes from.

use std::sync::OnceLock;

/// One accelerator model.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub pattern: String,
    pub cores_per_device: u32,
    /// What one "core" is: SM, CU, Xe core, core.
    pub unit: String,
    pub device: String,
    pub source: String,
}

const TABLE_CSV: &str = include_str!("../../../../data/top500/accelerators.csv");

fn key(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The embedded table, parsed once. Rows that do not parse are a build-time data bug, caught by
/// the test below; at run time they are skipped rather than panicking.
fn table() -> &'static [(String, Device)] {
    static TABLE: OnceLock<Vec<(String, Device)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut rdr = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .from_reader(TABLE_CSV.as_bytes());
        rdr.records()
            .filter_map(Result::ok)
            .filter_map(|r| {
                let d = Device {
                    pattern: r.get(0)?.to_string(),
                    cores_per_device: r.get(1)?.trim().parse().ok().filter(|&n| n > 0)?,
                    unit: r.get(2)?.to_string(),
                    device: r.get(3)?.to_string(),
                    source: r.get(4)?.to_string(),
                };
                Some((key(&d.pattern), d))
            })
            .collect()
    })
}

/// The device named by `accelerator` (the list's "Accelerator/Co-Processor" text): the longest
/// table pattern it contains, e.g. "NVIDIA Tesla P100" → P100 (56 SMs). `None` when nothing
/// matches, or when the text names two different devices ("NVIDIA K20/K20x, Xeon Phi 5110P"):
/// a mixed system has no single cores-per-device figure.
pub fn device_for(accelerator: &str) -> Option<&'static Device> {
    let k = key(accelerator);
    let hits: Vec<&(String, Device)> = table()
        .iter()
        .filter(|(p, _)| !p.is_empty() && k.contains(p.as_str()))
        .collect();
    // Drop patterns contained in a longer hit ("K20" inside "K20x", "MI250" inside "MI250X").
    let maximal: Vec<&Device> = hits
        .iter()
        .filter(|(p, _)| {
            !hits
                .iter()
                .any(|(q, _)| q.len() > p.len() && q.contains(p.as_str()))
        })
        .map(|(_, d)| d)
        .collect();
    match maximal.as_slice() {
        [d] => Some(*d),
        [first, rest @ ..] if rest.iter().all(|d| d.device == first.device) => Some(*first),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_the_table_parses() {
        let rows = TABLE_CSV
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .count()
            - 1;
        assert_eq!(table().len(), rows);
        assert!(table().iter().all(|(_, d)| !d.source.is_empty()));
    }

    #[test]
    fn longest_pattern_wins() {
        // SM counts: P100 56 (P100 whitepaper), V100 80, K20X 14 vs K20 13, MI250X 220 vs MI250 208.
        let sms = |a: &str| device_for(a).map(|d| d.cores_per_device);
        assert_eq!(sms("NVIDIA Tesla P100"), Some(56));
        assert_eq!(sms("NVIDIA Volta GV100"), Some(80));
        assert_eq!(sms("NVIDIA K20x"), Some(14));
        assert_eq!(sms("NVIDIA Tesla K20"), Some(13));
        assert_eq!(sms("AMD Instinct MI250X"), Some(220));
        assert_eq!(sms("AMD Instinct MI250"), Some(208));
        assert_eq!(sms("NVIDIA H100 PCIe"), Some(114));
        assert_eq!(sms("NVIDIA H100 SXM5 80 GB"), Some(132));
        assert_eq!(sms("Deep Computing Processor"), None);
        // Two devices in one system: no single count.
        assert_eq!(sms("NVIDIA Tesla K40/Intel Xeon Phi 7120P"), None);
        assert_eq!(sms("NVIDIA K20/K20x, Xeon Phi 5110P"), None);
    }
}
