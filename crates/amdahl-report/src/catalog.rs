//! Rendering of the catalogs: listing tables and CSV, and one device in full with its sources.

use crate::carbon::num as sig;
use crate::table::{Align, Table};
use amdahl_model::catalog::devices::{Device, PeakPrecision};
use amdahl_model::catalog::grid::GridIntensity;
use amdahl_model::catalog::models::ModelShape;
use amdahl_model::catalog::pue::PuePreset;
use amdahl_model::catalog::servers::Server;
use amdahl_model::units::FlopsPerSecond;

fn opt<T>(x: Option<T>, f: impl Fn(T) -> String) -> String {
    x.map(f).unwrap_or_else(|| "-".into())
}

fn tflops(x: Option<FlopsPerSecond>) -> String {
    opt(x, |v| sig(v.tflops(), 4))
}

fn gbs(x: Option<amdahl_model::units::BytesPerSecond>) -> String {
    opt(x, |v| sig(v.get() / 1e9, 4))
}

/// Dense peaks (TFLOP/s; int8 in TOP/s), memory, links and TDP, one device per row.
pub fn devices_table(devices: &[&Device]) -> String {
    let mut t = Table::new([
        "device",
        "kind",
        "fp64",
        "fp32",
        "tf32",
        "bf16/fp16",
        "fp8",
        "int8",
        "mem GB",
        "mem GB/s",
        "link GB/s",
        "TDP W",
    ])
    .align(1, Align::Left);
    for d in devices {
        let mut row = vec![d.name.clone(), format!("{:?}", d.kind).to_lowercase()];
        row.extend(PeakPrecision::ALL.iter().map(|p| tflops(d.peak(*p))));
        row.push(opt(d.memory_gb(), |g| sig(g, 4)));
        row.push(gbs(d.memory_bandwidth));
        row.push(gbs(d.link_bandwidth));
        row.push(opt(d.tdp, |w| sig(w.get(), 4)));
        t.row(row);
    }
    let mut s = t.render();
    s.push_str("peaks: dense vendor TFLOP/s (int8: TOP/s); `amdahl catalog devices NAME` shows sparse peaks and sources\n");
    s
}

/// One device, every field, with its sources.
pub fn device_detail(d: &Device) -> String {
    let mut t = Table::new(["field", "value"]).align(1, Align::Left);
    let mut kv = |k: &str, v: String| t.row([k.to_string(), v]);
    kv("name", d.name.clone());
    kv("aliases", d.aliases.join(", "));
    kv("kind", format!("{:?}", d.kind).to_lowercase());
    kv("vendor", d.vendor.clone());
    for p in PeakPrecision::ALL {
        let unit = if p == PeakPrecision::Int8 {
            "TOP/s"
        } else {
            "TFLOP/s"
        };
        let dense = d.peak(p);
        let sparse = d.sparse_peak(p);
        if dense.is_none() && sparse.is_none() {
            continue;
        }
        let mut v = format!("{} {unit}", tflops(dense));
        if let Some(s) = sparse {
            v.push_str(&format!(" (2:4 sparse {})", sig(s.tflops(), 4)));
        }
        kv(&format!("peak {p}"), v);
    }
    kv(
        "memory",
        opt(d.memory_gb(), |g| format!("{} GB", sig(g, 4))),
    );
    kv(
        "memory bandwidth",
        opt(d.memory_bandwidth, |b| {
            format!("{} GB/s", sig(b.get() / 1e9, 4))
        }),
    );
    kv(
        "link",
        format!("{} GB/s {}", gbs(d.link_bandwidth), d.link)
            .trim()
            .to_string(),
    );
    kv("TDP", opt(d.tdp, |w| format!("{} W", sig(w.get(), 4))));
    kv("idle", opt(d.idle, |w| format!("{} W", sig(w.get(), 4))));
    if !d.arch.is_empty() {
        kv("architecture", d.arch.clone());
    }
    if let Some(g) = d.scale_out_gbit {
        kv(
            "scale-out",
            format!("{} Gbit/s per device ({})", sig(g, 4), d.scale_out_source),
        );
    }
    if let Some(c) = d.cores {
        kv("cores", c.to_string());
        kv(
            "TDP per core",
            opt(d.tdp_per_core(), |w| format!("{} W", sig(w.get(), 3))),
        );
    }
    kv(
        "die area",
        opt(d.die_area_mm2, |a| format!("{} mm2", sig(a, 4))),
    );
    kv("process", opt(d.process_nm, |n| format!("{n} nm")));
    kv("year", d.year.to_string());
    kv("source", d.source.clone());
    kv("embodied source", d.embodied_source.clone());
    t.render()
}

/// Countries, the world default and cloud regions with value, year, scope and source.
pub fn regions_table(items: &[GridIntensity]) -> String {
    let mut t = Table::new(["code", "name", "gCO2e/kWh", "year", "scope", "source"])
        .align(1, Align::Left)
        .align(4, Align::Left)
        .align(5, Align::Left);
    for g in items {
        t.row([
            g.code.clone(),
            g.name.clone(),
            sig(g.g_per_kwh.get(), 4),
            amdahl_model::catalog::grid::year_label(g.year),
            g.scope.name().to_string(),
            g.source.clone(),
        ]);
    }
    t.render()
}

/// Model shapes.
pub fn models_table(models: &[&ModelShape]) -> String {
    let mut t = Table::new([
        "model",
        "also called",
        "arch",
        "params",
        "layers",
        "hidden",
        "heads",
        "kv",
        "ffn",
        "vocab",
        "seq",
        "context",
        "fwd FLOP/sample",
    ])
    .align(1, Align::Left)
    .align(2, Align::Left);
    let n = |x: Option<u32>| opt(x, |v| v.to_string());
    for m in models {
        t.row([
            m.name.clone(),
            // The short names users type (`--model gpt3`), so the catalog shows what to type.
            m.aliases.join(", "),
            m.arch.clone(),
            sig(m.params, 3),
            n(m.layers),
            n(m.hidden),
            n(m.heads),
            n(m.kv_heads),
            n(m.ffn),
            n(m.vocab),
            n(m.seq),
            // The longest request a server of it takes (`serve`, `infer`): the checkpoint's
            // context, else the training sequence.
            n(m.context.or(m.seq)),
            opt(m.fwd_flops_per_sample, |f| sig(f.get(), 3)),
        ]);
    }
    t.render()
}

/// PUE presets.
pub fn pue_table(presets: &[&PuePreset]) -> String {
    let mut t = Table::new(["preset", "PUE", "year", "source"]).align(3, Align::Left);
    for p in presets {
        t.row([
            p.name.clone(),
            sig(p.pue, 3),
            p.year.to_string(),
            p.source.clone(),
        ]);
    }
    t.render()
}

/// The servers, with the host power amdahl charges each at the server scope.
pub fn servers_table(servers: &[&Server]) -> String {
    let mut t = Table::new([
        "server",
        "also called",
        "GPUs",
        "max power",
        "PSU eff.",
        "CPUs",
        "year",
        "source",
    ])
    .align(1, Align::Left)
    .align(5, Align::Left)
    .align(7, Align::Left);
    for s in servers {
        t.row([
            s.name.clone(),
            s.aliases.join(", "),
            format!("{} × {}", s.gpus, s.gpu),
            format!("{} kW", sig(s.max_power_w / 1e3, 3)),
            sig(s.psu_efficiency, 2),
            s.cpus.clone(),
            s.year.to_string(),
            s.source.clone(),
        ]);
    }
    t.render()
}

/// CSV of any listing: the caller gives the header and the rows as strings.
pub fn csv_rows(
    header: &[&str],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header)?;
    for r in rows {
        w.write_record(&r)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Devices as CSV (SI-free vendor units, as in data/devices.csv).
pub fn devices_csv(devices: &[&Device]) -> Result<String, csv::Error> {
    let f = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
    let mut header = vec!["name", "kind"];
    header.extend([
        "fp64_tflops",
        "fp32_tflops",
        "tf32_tflops",
        "fp16_tflops",
        "fp8_tflops",
        "int8_tops",
    ]);
    header.extend([
        "memory_gb",
        "memory_bw_gbs",
        "link_gbs",
        "tdp_w",
        "cores",
        "die_mm2",
        "process_nm",
        "year",
        "source",
    ]);
    csv_rows(
        &header,
        devices.iter().map(|d| {
            let mut r = vec![d.name.clone(), format!("{:?}", d.kind).to_lowercase()];
            r.extend(
                PeakPrecision::ALL
                    .iter()
                    .map(|p| f(d.peak(*p).map(|x| x.tflops()))),
            );
            r.push(f(d.memory_gb()));
            r.push(f(d.memory_bandwidth.map(|b| b.get() / 1e9)));
            r.push(f(d.link_bandwidth.map(|b| b.get() / 1e9)));
            r.push(f(d.tdp.map(|w| w.get())));
            r.push(d.cores.map(|c| c.to_string()).unwrap_or_default());
            r.push(f(d.die_area_mm2));
            r.push(f(d.process_nm));
            r.push(d.year.to_string());
            r.push(d.source.clone());
            r
        }),
    )
}

/// Grid intensities as CSV.
pub fn regions_csv(items: &[GridIntensity]) -> Result<String, csv::Error> {
    csv_rows(
        &["code", "name", "g_per_kwh", "year", "scope", "source"],
        items.iter().map(|g| {
            vec![
                g.code.clone(),
                g.name.clone(),
                g.g_per_kwh.get().to_string(),
                g.year.map(|y| y.to_string()).unwrap_or_default(),
                g.scope.name().to_string(),
                g.source.clone(),
            ]
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::catalog::{devices, grid};

    #[test]
    fn device_detail_shows_sources_and_sparse() {
        let s = device_detail(devices::lookup("h100").unwrap());
        assert!(s.contains("989.4 TFLOP/s (2:4 sparse 1,979)"), "{s}");
        assert!(s.contains("NVIDIA H100 Tensor Core GPU datasheet"), "{s}");
    }

    #[test]
    fn regions_csv_round_trips_the_world_row() {
        let all = grid::embedded().unwrap().all();
        let s = regions_csv(&all).unwrap();
        let second = s.lines().nth(1).unwrap();
        assert!(
            second.starts_with("world,World,436,2022,lifecycle,"),
            "{second}"
        );
    }
}
