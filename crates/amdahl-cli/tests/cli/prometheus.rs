//! A real Prometheus server (Debian `prometheus`, started here on loopback, stopped by PID)
//! scrapes `amdahl exporter` over a fake powercap tree whose counters advance by known amounts.
//! PromQL over the scraped series must give the energy the tree produced, to the joule, and
//! the per-cgroup series plus the unattributed one must sum to the node, through a counter wrap
//! and a sensor file that disappears. Skips with a message where `prometheus` is not installed
//! (fails under CI=true, where `.ci/run` installs it).

use crate::support::fake_node::{set_energy, start, trees, Trees, PKG_MAX};
use crate::support::real::{free_port, get, require, spawn, wait_for, Running};
use amdahl_meter::attribution::procs::fake as fproc;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

/// `s` percent-encoded for a query string (RFC 3986 unreserved characters kept).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant PromQL query: each result's labels and value.
fn query(prom: SocketAddr, q: &str) -> Vec<(serde_json::Value, f64)> {
    let (code, body) = get(prom, &format!("/api/v1/query?query={}", encode(q)));
    assert_eq!(code, 200, "{q}: {body}");
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| {
            let x = r["value"][1].as_str()?.parse().ok()?;
            Some((r["metric"].clone(), x))
        })
        .collect()
}

fn scalar(prom: SocketAddr, q: &str) -> Option<f64> {
    query(prom, q).first().map(|(_, v)| *v)
}

/// Debian's Prometheus scraping `exporter` every second, from a config and TSDB in `t`'s temp
/// dir; None (after saying why) where it is not installed.
fn prometheus(t: &Trees, exporter: SocketAddr) -> Option<(Running, SocketAddr)> {
    let prometheus = require("prometheus", "prometheus")?;
    let port = free_port();
    let cfg = t.dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: amdahl\n    static_configs:\n      - targets: ['{exporter}']\n"
        ),
    )
    .unwrap();
    let mut c = Command::new(prometheus);
    c.arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            t.dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn");
    let running = spawn(c, &t.dir.path().join("prometheus.log"));
    let prom: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_for(Duration::from_secs(30), "Prometheus ready", || {
        crate::support::real::request(prom, b"GET /-/ready HTTP/1.0\r\n\r\n")
            .ok()
            .filter(|(c, _)| *c == 200)
    });
    Some((running, prom))
}

#[test]
fn prometheus_scrapes_exact_energy_and_parts_that_sum_to_the_node() {
    let t = trees();
    let (_ex, exporter) = start(&t, &[]);
    let Some((_prom, prom)) = prometheus(&t, exporter) else {
        return;
    };

    // 8 steps of 7 J (the 50 J package range wraps once), dram +1 J per step, processes busy
    // 30 and 20 of every 100 busy ticks; then the dram file vanishes and the package adds 4 J.
    let mut pkg = 0u64;
    for step in 1..=8u64 {
        pkg = (pkg + 7_000_000) % (PKG_MAX + 1);
        fproc::machine(&t.proc(), 100 * step, 1_000_000).unwrap();
        fproc::set_ticks(&t.proc(), 100, "trainer", 30 * step, 1000).unwrap();
        fproc::set_ticks(&t.proc(), 200, "solver", 20 * step, 500).unwrap();
        set_energy(&t.powercap(), "intel-rapl:0", pkg);
        set_energy(&t.powercap(), "intel-rapl:0:2", step * 1_000_000);
        std::thread::sleep(Duration::from_millis(300));
    }
    std::fs::remove_file(t.powercap().join("intel-rapl:0/intel-rapl:0:2/energy_uj")).unwrap();
    set_energy(
        &t.powercap(),
        "intel-rapl:0",
        (pkg + 4_000_000) % (PKG_MAX + 1),
    );

    let node = r#"amdahl_energy_joules_total{scope="node",device="intel-rapl:0"}"#;
    let got = wait_for(Duration::from_secs(30), "Prometheus to scrape 60 J", || {
        scalar(prom, node).filter(|v| (v - 60.0).abs() < 1e-6)
    });
    // To the joule (and better): 56 J of steps + 4 J after the dram loss, through the wrap.
    assert!((got - 60.0).abs() < 1e-6, "{got}");
    let dram = scalar(
        prom,
        r#"amdahl_energy_joules_total{scope="node",device="intel-rapl:0:2"}"#,
    );
    assert_eq!(dram, Some(8.0));
    assert_eq!(scalar(prom, r#"up{job="amdahl"}"#), Some(1.0));
    for dev in ["intel-rapl:0", "intel-rapl:0:2"] {
        let parts = scalar(
            prom,
            &format!(
                r#"sum(amdahl_energy_joules_total{{scope=~"cgroup|unattributed",device="{dev}"}}) - sum(amdahl_energy_joules_total{{scope="node",device="{dev}"}})"#
            ),
        );
        assert!(
            parts.is_some_and(|d| d.abs() < 1e-6),
            "{dev}: cgroups + unattributed − node = {parts:?}"
        );
        let users = scalar(
            prom,
            &format!(
                r#"sum(amdahl_energy_joules_total{{scope=~"user|unattributed",device="{dev}"}}) - sum(amdahl_energy_joules_total{{scope="node",device="{dev}"}})"#
            ),
        );
        assert!(
            users.is_some_and(|d| d.abs() < 1e-6),
            "{dev}: users + unattributed − node = {users:?}"
        );
    }
    // Per-cgroup series as Prometheus stored them: the two processes' cgroups and `unknown`'s
    // absence of CPU time (its ticks never advanced).
    let by_cgroup = query(
        prom,
        r#"sum by (cgroup) (amdahl_energy_joules_total{scope="cgroup",device="intel-rapl:0"})"#,
    );
    let names: Vec<String> = by_cgroup
        .iter()
        .filter_map(|(m, _)| m["cgroup"].as_str().map(str::to_string))
        .collect();
    assert!(
        names.contains(&"/system.slice/train.service".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"/slurm/uid_0/job_42/step_0".to_string()),
        "{names:?}"
    );
}

/// The Grafana queries of docs/usage/exporter.md, as written there (`$__rate_interval` → 1m,
/// `$__range` → 10m, job 4242 → 501), against a real Prometheus after three Slurm jobs ran one
/// after the other and ended (`--retain 2s`, so their series left while Prometheus watched).
///
/// Regression: an ended job's whole total jumped into a `job="(ended)"` series in one interval,
/// so `sum(increase(...{scope="job"}[w]))` counted every ended job twice (2,442 J for 1,411 J
/// used). Now each job's energy is counted once: the sum over jobs is the 24 J they used, less
/// what Prometheus cannot see before each job's first scrape, never more. Also: the doc's
/// per-job queries filtered on `job`, which Prometheus renames to `exported_job` (it keeps `job`
/// for the scrape job): they returned nothing.
#[test]
fn grafana_queries_count_every_ended_job_once() {
    let t = trees();
    let (_ex, exporter) = start(&t, &["--retain", "2s"]);
    let Some((_prom, prom)) = prometheus(&t, exporter) else {
        return;
    };
    // Prometheus applies new targets after a few seconds: the jobs start once it scrapes.
    wait_for(Duration::from_secs(30), "Prometheus's first scrape", || {
        scalar(prom, r#"up{job="amdahl"}"#).filter(|v| *v == 1.0)
    });
    // Jobs 501, 502, 503 one after the other: each 8 steps of 1 J of package energy, all of
    // the busy ticks its own, ~0.7 s apart (several scrapes per job), then it exits.
    let (mut busy, mut uj) = (0u64, 0u64);
    for j in 0..3u32 {
        let pid = 1000 + j;
        let cg = format!("0::/system.slice/slurmstepd.scope/job_{}/step_0\n", 501 + j);
        fproc::process(&t.proc(), pid, "solver", 0, 0, Some(0), Some(&cg), &[]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        for step in 1..=8u64 {
            busy += 100;
            uj += 1_000_000;
            fproc::machine(&t.proc(), busy, 1_000_000).unwrap();
            fproc::set_ticks(&t.proc(), pid, "solver", 100 * step, 0).unwrap();
            set_energy(&t.powercap(), "intel-rapl:0", uj);
            std::thread::sleep(Duration::from_millis(700));
        }
        std::fs::remove_dir_all(t.proc().join(pid.to_string())).unwrap();
    }
    // Until the last job's series has left the exporter (--retain) and Prometheus has scraped
    // that, plus its staleness marker.
    wait_for(Duration::from_secs(20), "job 503 to leave", || {
        let (_, body) = get(exporter, "/metrics");
        (!body.contains(r#"job="503""#)).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    let jobs = scalar(
        prom,
        r#"sum(increase(amdahl_energy_joules_total{scope="job",device="intel-rapl:0"}[10m]))"#,
    )
    .unwrap_or(0.0);
    assert!(
        (0.6 * 24.0..=24.0 * 1.1).contains(&jobs),
        "three jobs of 8 J: sum(increase) over jobs = {jobs} J"
    );
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/usage/exporter.md"),
    )
    .unwrap();
    let queries = doc_queries(&doc);
    assert!(queries.len() >= 8, "{queries:?}");
    for (title, q) in &queries {
        let q = q
            .replace("$__rate_interval", "1m")
            .replace("$__range", "10m")
            .replace(r#"exported_job="4242""#, r#"exported_job="501""#);
        let r = query(prom, &q);
        if q.contains("amdahl_sensor_incomplete") {
            assert!(r.is_empty(), "{title}: {q}: {r:?}");
            continue;
        }
        assert!(!r.is_empty(), "{title}: {q}: no result");
        let v = r[0].1;
        if title.starts_with("A job's total energy (J)") && !q.contains("3.6e6") {
            assert!((0.6 * 8.0..=8.0 * 1.1).contains(&v), "{title}: {q} = {v} J");
        }
        if title.starts_with("Energy of all Slurm jobs") {
            assert!(
                (0.6 * 24.0..=24.0 * 1.1).contains(&v),
                "{title}: {q} = {v} J"
            );
        }
        if title.starts_with("Idle and kernel share") {
            assert!((0.0..=1.0).contains(&v), "{title}: {q} = {v}");
        }
    }
}

/// The PromQL queries of the doc's ```promql block, each with the comment above it; a line
/// that starts with a space continues the query before it.
fn doc_queries(doc: &str) -> Vec<(String, String)> {
    let Some(block) = doc
        .split("```promql\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
    else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    let mut title = String::new();
    for line in block.lines() {
        if let Some(c) = line.strip_prefix("# ") {
            title = c.to_string();
        } else if line.starts_with(' ') {
            if let Some(last) = out.last_mut() {
                last.1.push_str(line);
            }
        } else if !line.trim().is_empty() {
            out.push((title.clone(), line.to_string()));
        }
    }
    out
}
