//! Cost of `amdahl exporter` on a busy node: 500 processes in 50 cgroups — a fake
//! /proc tree in a temp dir with the real layout, whose CPU ticks advance every second — and a
//! fake powercap tree, sampled at 1 s. Prints the exporter's CPU % of one core and RSS not
//! scraped, scraped once a second (every sample rendered) and under load, and scrape latency p50/p99/max under 20 concurrent scrapers for 30 s (loopback, one
//! connection per request).
//!
//! Usage: `cargo run --release -p amdahl-cli --example bench_exporter -- [AMDAHL_BIN] [SECONDS]
//! [EXPORTER FLAGS...]`
//! (or scripts/bench/exporter.sh). AMDAHL_BIN defaults to target/release/amdahl.

use amdahl_meter::attribution::procs::fake as fproc;
use amdahl_meter::rapl::fake as fcap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROCS: u32 = 500;
const CGROUPS: u32 = 50;
const SCRAPERS: usize = 20;

fn ticks_of(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.get(s.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((t, rss))
}

fn scrape(addr: SocketAddr) -> Option<(Duration, usize)> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    buf.starts_with(b"HTTP/1.1 200")
        .then(|| (t0.elapsed(), buf.len()))
}

fn pct(v: &[Duration], p: f64) -> f64 {
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).map(|d| d.as_secs_f64() * 1e3).unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let bin = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "target/release/amdahl".into());
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(30);
    // Further exporter flags, e.g. `--no-process-series`.
    let extra: Vec<String> = args.iter().skip(3).cloned().collect();
    let dir = tempfile::tempdir()?;
    let (cap, proc_root) = (dir.path().join("powercap"), dir.path().join("proc"));
    fcap::zone(&cap, "intel-rapl:0", "package-0", 0, 262_143_328_850)?;
    fcap::zone(&cap, "intel-rapl:0:2", "dram", 0, 65_712_999_613)?;
    fproc::machine(&proc_root, 0, 64 * 1024 * 1024)?;
    for i in 0..PROCS {
        let cg = format!("0::/system.slice/svc-{}.service\n", i % CGROUPS);
        fproc::process(
            &proc_root,
            1000 + i,
            "worker",
            0,
            2560,
            Some(0),
            Some(&cg),
            &[],
        )?;
    }
    // The node: every second each process uses 1 tick, the machine 600, the package 100 J.
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, c2, p2) = (Arc::clone(&stop), cap.clone(), proc_root.clone());
    let ticker = std::thread::spawn(move || {
        let mut k = 0u64;
        while !s2.load(Ordering::SeqCst) {
            k += 1;
            let _ = fproc::machine(&p2, 600 * k, 64 * 1024 * 1024);
            for i in 0..PROCS {
                let _ = fproc::set_ticks(&p2, 1000 + i, "worker", k, 2560);
            }
            let _ = std::fs::write(
                c2.join("intel-rapl:0/energy_uj"),
                format!("{}\n", k * 100_000_000),
            );
            let _ = std::fs::write(
                c2.join("intel-rapl:0/intel-rapl:0:2/energy_uj"),
                format!("{}\n", k * 10_000_000),
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let ready = dir.path().join("ready");
    let mut child = Command::new(&bin)
        .args([
            "exporter",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "1s",
            "--no-gpu",
            "--ready-file",
        ])
        .arg(&ready)
        .arg("--powercap-root")
        .arg(&cap)
        .arg("--proc-root")
        .arg(&proc_root)
        .args(&extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
    let t0 = Instant::now();
    let addr: SocketAddr = loop {
        if let Some(a) = std::fs::read_to_string(&ready)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break a;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            return Err("the exporter did not start".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_secs(3));
    let series = scrape(addr).map(|(_, n)| n).unwrap_or(0);

    // Phase 1: idle cost (no scrapers), `secs` seconds.
    let (c0, _) = ticks_of(pid).ok_or("exporter gone")?;
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let (c1_idle, rss_idle) = ticks_of(pid).ok_or("exporter gone")?;
    let idle_cpu = (c1_idle - c0) as f64 / 100.0 / w0.elapsed().as_secs_f64() * 100.0;

    // Phase 1b: scraped once a second, as by a Prometheus with a 1 s scrape interval: every
    // sample is rendered (the text is rendered on demand, at most once per sample).
    let w = Instant::now();
    let mut next = w;
    while w.elapsed() < Duration::from_secs(secs) {
        next += Duration::from_secs(1);
        let _ = scrape(addr);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let (c1, rss_1s) = ticks_of(pid).ok_or("exporter gone")?;
    let per_second_cpu = (c1 - c1_idle) as f64 / 100.0 / w.elapsed().as_secs_f64() * 100.0;

    // Phase 2: 20 scrapers in a loop for `secs` seconds.
    let lat = Arc::new(Mutex::new(Vec::new()));
    let end = Instant::now() + Duration::from_secs(secs);
    let w1 = Instant::now();
    let workers: Vec<_> = (0..SCRAPERS)
        .map(|_| {
            let lat = Arc::clone(&lat);
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let mut failed = 0u64;
                while Instant::now() < end {
                    match scrape(addr) {
                        Some((d, _)) => mine.push(d),
                        None => failed += 1,
                    }
                }
                if let Ok(mut l) = lat.lock() {
                    l.extend(mine);
                }
                failed
            })
        })
        .collect();
    let failed: u64 = workers.into_iter().map(|w| w.join().unwrap_or(0)).sum();
    let (c2_, rss_load) = ticks_of(pid).ok_or("exporter gone")?;
    let load_cpu = (c2_ - c1) as f64 / 100.0 / w1.elapsed().as_secs_f64() * 100.0;
    let mut v = lat.lock().map(|l| l.clone()).unwrap_or_default();
    v.sort();
    stop.store(true, Ordering::SeqCst);
    let _ = ticker.join();
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "amdahl exporter {}, {PROCS} processes in {CGROUPS} cgroups (fake /proc), 1 s interval, binary {bin}",
        extra.join(" ")
    );
    println!("  /metrics size:            {series} bytes");
    println!(
        "  not scraped ({secs} s):     CPU {idle_cpu:.2} % of one core, RSS {:.1} MB",
        rss_idle as f64 / 1024.0
    );
    println!(
        "  scraped every 1 s ({secs} s): CPU {per_second_cpu:.2} % of one core, RSS {:.1} MB",
        rss_1s as f64 / 1024.0
    );
    println!(
        "  {SCRAPERS} scrapers ({secs} s):     {} scrapes ({:.0}/s), {failed} failed; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        v.len(),
        v.len() as f64 / secs as f64,
        pct(&v, 0.5),
        pct(&v, 0.99),
        pct(&v, 1.0)
    );
    println!(
        "  under load:               CPU {load_cpu:.1} % of one core, RSS {:.1} MB",
        rss_load as f64 / 1024.0
    );
    Ok(())
}
