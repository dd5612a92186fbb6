//! A real Prometheus server (Debian `prometheus`, started here on loopback, stopped by PID)
//! scrapes `amdahl exporter` over a fake powercap tree whose counters advance by known amounts.
//! PromQL over the scraped series must give the energy the tree produced, to the joule, and
//! the per-cgroup series plus the unattributed one must sum to the node, through a counter wrap
//! and a sensor file that disappears. Skips with a message where `prometheus` is not installed
//! (fails under CI=true, where `.ci/run` installs it).

use crate::support::fake_node::{set_energy, start, trees, PKG_MAX};
use crate::support::real::{free_port, get, require, spawn, wait_for};
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

#[test]
fn prometheus_scrapes_exact_energy_and_parts_that_sum_to_the_node() {
    let Some(prometheus) = require("prometheus", "prometheus") else {
        return;
    };
    let t = trees();
    let (_ex, exporter) = start(&t, &[]);
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
    let _prom = spawn(c, &t.dir.path().join("prometheus.log"));
    let prom: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_for(Duration::from_secs(30), "Prometheus ready", || {
        crate::support::real::request(prom, b"GET /-/ready HTTP/1.0\r\n\r\n")
            .ok()
            .filter(|(c, _)| *c == 200)
    });

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
