//! `amdahl exporter`: a node agent that samples the same sensors as `amdahl run`, attributes the
//! energy to cgroups, Slurm jobs, users and processes (`amdahl_meter::attribution`), and serves
//! OpenMetrics text on `/metrics` for Prometheus.
//!
//! Threads: the sampler renders the metrics text once per interval into a shared buffer; the
//! main thread accepts requests (tiny_http parses each connection on its own thread) and answers
//! each on a short-lived thread of its own, at most [`MAX_IN_FLIGHT`] at a time, so a client
//! that reads slowly holds one thread, never the others.

use amdahl_meter::attribution::{procs::ProcFs, Attributor, Options};
use amdahl_meter::estimate::Target;
use amdahl_meter::gpu::parse_visible;
use amdahl_meter::{rapl, sampler, sensors, Meter};
use anyhow::{anyhow, Context, Result};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// The default address: loopback only, port 9675 (next to Scaphandre's 8080 and node_exporter's
/// 9100 in spirit; unassigned on the Prometheus default port allocation wiki page).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9675";
/// Longest request target answered (414 beyond). /metrics needs a few bytes; this bounds what a
/// confused or hostile client can make us look at.
pub const MAX_URL: usize = 2048;
/// Requests answered at once; more get 503 at once rather than queueing behind slow readers.
pub const MAX_IN_FLIGHT: usize = 64;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Serve /metrics on this address and port [default: 127.0.0.1:9675; port 0 picks one].
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Allow a --listen address other than loopback (the metrics name users, jobs and processes).
    #[arg(long)]
    pub allow_remote: bool,
    /// Sample the sensors this often.
    #[arg(long, default_value = "1s", value_parser = super::run::parse_interval)]
    pub interval: Duration,
    #[command(flatten)]
    pub powercap: super::run::PowercapArgs,
    /// Root of the proc filesystem (the host's /proc bind-mounted into a container; tests).
    #[arg(
        long,
        env = "AMDAHL_PROC_ROOT",
        default_value = "/proc",
        value_name = "DIR"
    )]
    pub proc_root: PathBuf,
    /// Do not open NVML.
    #[arg(long)]
    pub no_gpu: bool,
    /// Leave out per-process series (keep cgroup, job and user series only).
    #[arg(long)]
    pub no_process_series: bool,
    /// Add each process's command line as a label (off by default: arguments can hold secrets).
    #[arg(long)]
    pub expose_cmdline: bool,
    /// Print the metrics once, one interval after the start, and exit (no server).
    #[arg(long)]
    pub once: bool,
    /// Stop after this long [default: until SIGINT or SIGTERM].
    #[arg(long, value_parser = super::run::parse_duration)]
    pub duration: Option<Duration>,
    /// Write the address actually bound (`IP:PORT`) to this file once serving.
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
}

type Shared = Arc<RwLock<Arc<String>>>;

pub fn run(args: Args) -> Result<ExitCode> {
    if !args.listen.ip().is_loopback() && !args.allow_remote && !args.once {
        eprintln!(
            "error: --listen {} is not a loopback address; the metrics name users, Slurm jobs and \
             processes, so serving them beyond this machine needs --allow-remote (and a firewall \
             or a TLS proxy in front)",
            args.listen
        );
        return Ok(ExitCode::from(2));
    }
    let d = sensors::discover(sensors::Options {
        powercap_root: args.powercap.powercap_root.clone(),
        reader: rapl::fs_reader(),
        cpu_tdp: None,
        nvml: !args.no_gpu,
        visible: parse_visible(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
        target: Target::Machine,
    });
    for w in &d.warnings {
        eprintln!("amdahl: warning: {w}");
    }
    let mut attributor = Attributor::new(
        Box::new(ProcFs::new(&args.proc_root)),
        Options {
            processes: !args.no_process_series,
            cmdline: args.expose_cmdline,
        },
    );
    let shared: Shared = Arc::new(RwLock::new(Arc::new(String::new())));
    let out = Arc::clone(&shared);
    let s = sampler::start(
        Meter::new(d.sources),
        args.interval,
        Box::new(move |meter, sample| {
            attributor.step(sample.t_s.get(), &meter.energies());
            match amdahl_report::exporter::render(&attributor.snapshot()) {
                Ok(text) => {
                    if let Ok(mut g) = out.write() {
                        *g = Arc::new(text);
                    }
                }
                Err(e) => eprintln!("amdahl: warning: rendering the metrics: {e}"),
            }
        }),
    );
    if args.once {
        std::thread::sleep(args.interval);
        s.stop().context("stopping the sampler")?;
        let text = current(&shared);
        crate::output::print(&text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let served = serve(&args, &shared);
    s.stop().context("stopping the sampler")?;
    served.map(|_| ExitCode::SUCCESS)
}

fn current(shared: &Shared) -> Arc<String> {
    shared
        .read()
        .map(|g| Arc::clone(&g))
        .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
}

fn serve(args: &Args, shared: &Shared) -> Result<()> {
    let server = tiny_http::Server::http(args.listen)
        .map_err(|e| anyhow!("cannot listen on {}: {e} (is another exporter running? pick another port with --listen)", args.listen))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| anyhow!("the server is not on an IP address"))?;
    if !bound.ip().is_loopback() {
        eprintln!(
            "amdahl: warning: serving metrics beyond this machine on http://{bound}/metrics (--allow-remote)"
        );
    }
    eprintln!("amdahl exporter: serving http://{bound}/metrics");
    if let Some(f) = &args.ready_file {
        std::fs::write(f, bound.to_string())
            .with_context(|| format!("writing --ready-file {}", f.display()))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let deadline = args.duration.map(|d| Instant::now() + d);
    let in_flight = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) && deadline.is_none_or(|d| Instant::now() < d) {
        let req = match server.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("amdahl: warning: accepting a request: {e}");
                continue;
            }
        };
        if in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
            in_flight.fetch_sub(1, Ordering::SeqCst);
            let _ = req.respond(tiny_http::Response::empty(503));
            continue;
        }
        let text = current(shared);
        let n = Arc::clone(&in_flight);
        let spawned = std::thread::Builder::new()
            .name("amdahl-scrape".into())
            .spawn(move || {
                let _ = answer(req, &text);
                n.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
    Ok(())
}

/// A reader over the shared metrics text.
struct SharedText(Arc<String>, usize);

impl std::io::Read for SharedText {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = self.0.as_bytes().get(self.1..).unwrap_or(&[]);
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.1 += n;
        Ok(n)
    }
}

fn header(k: &str, v: &str) -> Option<tiny_http::Header> {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).ok()
}

/// Answer one request: `/metrics` (GET, HEAD), `/` (a pointer to it), 405 for other methods
/// there, 404 elsewhere, 414 for request targets over [`MAX_URL`].
fn answer(req: tiny_http::Request, metrics: &Arc<String>) -> std::io::Result<()> {
    use tiny_http::{Method, Response};
    let url = req.url();
    if url.len() > MAX_URL {
        return req
            .respond(Response::from_string("request target too long\n").with_status_code(414));
    }
    let path = url.split(['?', '#']).next().unwrap_or("");
    let readable = matches!(req.method(), Method::Get | Method::Head);
    let resp = match (path, readable) {
        ("/metrics", true) => {
            // The shared text itself, not a copy: 20 concurrent scrapes of 300 kB would
            // otherwise hold 6 MB of copies.
            let len = metrics.len();
            let headers = header("Content-Type", amdahl_report::exporter::CONTENT_TYPE)
                .into_iter()
                .collect();
            let r = Response::new(
                tiny_http::StatusCode(200),
                headers,
                SharedText(Arc::clone(metrics), 0),
                Some(len),
                None,
            );
            return req.respond(r);
        }
        ("/", true) => Response::from_string(
            "amdahl exporter: energy per node, cgroup, Slurm job, user and process at /metrics\n",
        ),
        ("/metrics" | "/", false) => {
            let mut r = Response::from_string("method not allowed: use GET or HEAD\n")
                .with_status_code(405);
            if let Some(h) = header("Allow", "GET, HEAD") {
                r = r.with_header(h);
            }
            r
        }
        _ => Response::from_string("not found: metrics are at /metrics\n").with_status_code(404),
    };
    req.respond(resp)
}
