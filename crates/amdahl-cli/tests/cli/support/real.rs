//! Helpers for tests that start real programs (the `amdahl exporter`, Prometheus, Slurm, Open
//! MPI): find a program or skip, stop children by PID, tiny HTTP/1.0 requests over loopback,
//! and a reader of the Prometheus exposition text.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The program on PATH (or in the sbin directories Debian puts daemons in). Missing: a failure
/// under `CI=true` (where `.ci/run` installs `package`), else None after saying why it skips.
pub fn require(program: &str, package: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"])
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file());
    if found.is_none() {
        let msg = format!(
            "`{program}` not found: install the Debian package `{package}` (`.ci/run` does in CI)"
        );
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}");
        }
        skip(&msg);
    }
    found
}

/// Say that a test skips, on the stderr handle rather than with eprintln!, so that libtest's
/// output capture does not hide it (as tests/support/shared_data.rs does).
pub fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipping: {why}");
}

/// A child process that is killed (by its PID) and reaped when dropped, so a failing assertion
/// never leaves a daemon behind.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cmd` with stdin closed and output to `log` (appended).
pub fn spawn(mut cmd: Command, log: &Path) -> Running {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|e| panic!("log {}: {e}", log.display()));
    let g = f.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
    cmd.stdin(Stdio::null()).stdout(f).stderr(g);
    match cmd.spawn() {
        Ok(c) => Running(c),
        Err(e) => panic!("starting {cmd:?}: {e}"),
    }
}

/// A TCP port free on loopback now.
pub fn free_port() -> u16 {
    match TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => panic!("no free port: {e}"),
    }
}

/// Poll `f` every 50 ms until it returns Some, or panic with `what` after `limit`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t0.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Send `raw` (a whole request) and read the reply until the server closes: (status, body).
pub fn request(addr: SocketAddr, raw: &[u8]) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(raw)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// `GET path` with `Connection: close`.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    request(addr, raw.as_bytes()).unwrap_or_else(|e| panic!("GET {path} from {addr}: {e}"))
}

/// One sample line of the exposition text.
#[derive(Debug, Clone)]
pub struct Metric {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parse sample lines `name{k="v",...} value` (comments skipped; escapes `\"`, `\\`, `\n`).
pub fn parse_metrics(text: &str) -> Vec<Metric> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (head, value) = match line.rsplit_once(' ') {
            Some(x) => x,
            None => continue,
        };
        let (name, mut rest) = match head.split_once('{') {
            Some((n, r)) => (n.to_string(), r.to_string()),
            None => (head.to_string(), String::new()),
        };
        let mut labels = BTreeMap::new();
        while let Some((k, r)) = rest.split_once("=\"") {
            let mut v = String::new();
            let mut chars = r.char_indices();
            let mut end = r.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, 'n')) => v.push('\n'),
                        Some((_, o)) => v.push(o),
                        None => {}
                    },
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            labels.insert(k.trim_start_matches(',').to_string(), v);
            rest = r.get(end..).unwrap_or("").to_string();
        }
        if let Ok(v) = value.parse() {
            out.push(Metric {
                name,
                labels,
                value: v,
            });
        }
    }
    out
}

/// Sum of `name` over samples whose labels include every pair of `want`.
pub fn sum(ms: &[Metric], name: &str, want: &[(&str, &str)]) -> f64 {
    ms.iter()
        .filter(|m| m.name == name)
        .filter(|m| {
            want.iter()
                .all(|(k, v)| m.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|m| m.value)
        .sum()
}
