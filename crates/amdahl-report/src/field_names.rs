//! Human names and units for the fields of saved results, as the HTML report's "Key figures"
//! shows them: `training.energy_kwh` reads "training: energy (kWh)", a year stays `2022` (not
//! `2,022`).
//!
//! The units come from the field names' suffixes, the convention every result schema follows
//! (docs/schema/: `_s`, `_j`, `_kwh`, `_w`, `_bytes`, `_g_per_kwh`, ...).

/// A field's unit, read from its name's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    None,
    /// Shown as printed after the name: `(kWh)`.
    Shown(&'static str),
    /// A calendar year: a plain integer.
    Year,
}

/// Suffixes and their units, longest first so `_g_per_kwh` wins over `_kwh`.
const SUFFIXES: [(&str, &str); 22] = [
    ("_g_per_kwh", "g/kWh"),
    ("_per_1000_requests_g", "g per 1,000 requests"),
    ("_tflops", "TFLOP/s"),
    ("_gflops", "GFLOP/s"),
    ("_mwh", "MWh"),
    ("_kwh", "kWh"),
    ("_wh", "Wh"),
    ("_uj", "µJ"),
    ("_mj", "mJ"),
    ("_kj", "kJ"),
    ("_j", "J"),
    ("_kw", "kW"),
    ("_w", "W"),
    ("_ms", "ms"),
    ("_s", "s"),
    ("_h", "h"),
    ("_kg", "kg"),
    ("_g", "g"),
    ("_gb", "GB"),
    ("_gib", "GiB"),
    ("_pct", "%"),
    ("_hz", "Hz"),
];

/// Abbreviations written in capitals, and words that read better spelled out.
fn word(w: &str) -> String {
    match w {
        "gpu" | "cpu" | "pue" | "tp" | "pp" | "dp" | "ep" | "mfu" | "hfu" | "mbu" | "ttft"
        | "tpot" | "kv" | "ram" | "slo" | "tdp" | "id" | "sp" | "moe" | "hbm" | "nvml" | "rapl"
        | "json" | "csv" | "it" => w.to_uppercase(),
        "gpus" => "GPUs".into(),
        "cpus" => "CPUs".into(),
        "co2e" => "CO2e".into(),
        "e2e" => "end-to-end".into(),
        "n" => "N".into(),
        "n0" => "N0".into(),
        "mbs" => "micro-batch".into(),
        "per" => "per".into(),
        w => w.to_string(),
    }
}

/// The unit a word of a key stands for (`kwh` in `kwh_per_1000_requests`).
fn unit_word(w: &str) -> Option<&'static str> {
    Some(match w {
        "kwh" => "kWh",
        "mwh" => "MWh",
        "wh" => "Wh",
        "j" => "J",
        "w" => "W",
        "g" => "g",
        "kg" => "kg",
        "s" => "s",
        _ => return None,
    })
}

/// Fields whose values are typed units without a suffix in their name, by the object they sit
/// in or their own name: a step's breakdown in seconds, memory in bytes, peaks in FLOP/s.
fn unit_of_typed(parent: Option<&str>, key: &str) -> Option<&'static str> {
    match (parent, key) {
        (_, "fits" | "estimated") => None,
        (Some("breakdown"), _) => Some("s"),
        (Some("memory"), _) | (Some("device"), "memory") => Some("bytes"),
        // A device's peak at a precision (`peak_bf16`); not every peak (`peak_kv_use` is a share).
        (_, k)
            if k.strip_prefix("peak_").is_some_and(|p| {
                matches!(
                    p,
                    "fp64" | "fp32" | "tf32" | "bf16" | "fp16" | "fp8" | "fp4" | "int8"
                )
            }) =>
        {
            Some("FLOP/s")
        }
        (_, k) if k.ends_with("bandwidth") => Some("bytes/s"),
        (Some("device"), "tdp" | "idle_power" | "power_cap") => Some("W"),
        // A plan's training cost (typed units): "training: emissions 4086701" stood bare
        // beside the statement's "4,087 kgCO₂e".
        (Some("training"), "train_time") => Some("s"),
        (Some("training"), "power_per_device" | "server_power_per_device") => Some("W"),
        (Some("training"), "it_energy" | "facility_energy" | "server_facility_energy") => Some("J"),
        (Some("training"), "emissions" | "server_emissions") => Some("gCO2e"),
        (Some("training"), "intensity") => Some("g/kWh"),
        _ => None,
    }
}

/// The words of one key (in the object `parent`), without its unit, and the unit.
fn split_key(parent: Option<&str>, key: &str) -> (String, Unit) {
    if key == "year" || key.ends_with("_year") {
        return (humanize(key), Unit::Year);
    }
    if let Some(u) = unit_of_typed(parent, key) {
        return (humanize(key), Unit::Shown(u));
    }
    if let Some(stem) = key.strip_suffix("_bytes") {
        return (humanize(stem), Unit::Shown("bytes"));
    }
    if let Some(stem) = key.strip_suffix("_per_s") {
        return (format!("{}/s", humanize(stem)), Unit::None);
    }
    if let Some(named) = unit_per(key) {
        return (named, Unit::None);
    }
    for (suffix, unit) in SUFFIXES {
        if let Some(stem) = key.strip_suffix(suffix) {
            if !stem.is_empty() {
                return (humanize(stem), Unit::Shown(unit));
            }
        }
    }
    (humanize(key), Unit::None)
}

/// A key with a unit then `per` inside it: `g_per_kwh` reads "g/kWh",
/// `kwh_per_1000_requests` "kWh per 1000 requests", `host_w_per_gpu` "host (W per GPU)".
fn unit_per(key: &str) -> Option<String> {
    let words: Vec<&str> = key.split('_').collect();
    let i = words
        .windows(2)
        .position(|w| unit_word(w[0]).is_some() && w[1] == "per")?;
    let unit = unit_word(words[i])?;
    let rest = &words[i + 2..];
    let per = match rest {
        [one] if unit_word(one).is_some() => format!("{unit}/{}", unit_word(one)?),
        _ => format!("{unit} per {}", humanize(&rest.join("_"))),
    };
    Some(if i == 0 {
        per
    } else {
        format!("{} ({per})", humanize(&words[..i].join("_")))
    })
}

fn humanize(key: &str) -> String {
    key.split('_')
        .filter(|w| !w.is_empty())
        .map(word)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The human name of a field at `path` (dot-separated keys): parents, then the field's own
/// name, then its unit in parentheses.
pub fn name(path: &str) -> String {
    let mut keys: Vec<&str> = path.split('.').collect();
    let last = keys.pop().unwrap_or(path);
    let (own, unit) = split_key(keys.last().copied(), last);
    let own = match unit {
        Unit::Shown(u) => format!("{own} ({u})"),
        Unit::None | Unit::Year => own,
    };
    if keys.is_empty() {
        return own;
    }
    let parents: Vec<String> = keys.iter().map(|k| humanize(k)).collect();
    format!("{}: {own}", parents.join(" › "))
}

/// A number of the field at `path` as the report shows it: years as written, everything else through [`crate::num`] (whole counts grouped, others to four digits).
pub fn value(path: &str, x: f64) -> String {
    let mut keys = path.rsplit('.');
    let last = keys.next().unwrap_or(path);
    match split_key(keys.next(), last).1 {
        Unit::Year if x.fract() == 0.0 && x.abs() < 1e6 => format!("{x:.0}"),
        _ => crate::num(x),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report's key figures were JSON paths with unit-less numbers, the year "2,022".
    #[test]
    fn fields_read_as_names_with_units() {
        assert_eq!(name("step_time_s"), "step time (s)");
        assert_eq!(name("training.energy_kwh"), "training: energy (kWh)");
        assert_eq!(name("grid_g_per_kwh"), "grid (g/kWh)");
        assert_eq!(
            name("co2e_per_1000_requests_g"),
            "CO2e (g per 1,000 requests)"
        );
        assert_eq!(name("output_tokens_per_s"), "output tokens/s");
        assert_eq!(name("memory_per_gpu_bytes"), "memory per GPU (bytes)");
        assert_eq!(name("power_per_gpu_w"), "power per GPU (W)");
        assert_eq!(name("layout.tp"), "layout: TP");
        assert_eq!(name("grid.year"), "grid: year");
        assert_eq!(name("mfu"), "MFU");
        assert_eq!(name("grid.g_per_kwh"), "grid: g/kWh");
        assert_eq!(name("kwh_per_1000_requests"), "kWh per 1000 requests");
        assert_eq!(name("server.host_w_per_gpu"), "server: host (W per GPU)");
        assert_eq!(name("breakdown.tp_comm"), "breakdown: TP comm (s)");
        assert_eq!(name("memory.weights"), "memory: weights (bytes)");
        assert_eq!(name("memory.fits"), "memory: fits");
        assert_eq!(name("device.peak_bf16"), "device: peak bf16 (FLOP/s)");
        // Regression: a serve result's `peak_kv_use` (a share of the KV cache) read "(FLOP/s)".
        assert_eq!(name("peak_kv_use"), "peak KV use");
        assert_eq!(name("device.tdp"), "device: TDP (W)");
        assert_eq!(name("gpus"), "GPUs");
    }

    #[test]
    fn years_stay_whole() {
        assert_eq!(value("grid.year", 2022.0), "2022");
        assert_eq!(value("intensity_year", 2019.0), "2019");
        assert_eq!(value("gpus", 2048.0), "2,048");
        assert_eq!(
            value("memory_per_gpu_bytes", 56_908_316_672.0),
            "56,908,316,672"
        );
        assert_eq!(value("mfu", 0.243_17), "0.2432");
    }
}
