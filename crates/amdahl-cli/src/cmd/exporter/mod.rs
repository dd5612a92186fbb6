//! `amdahl exporter`: a node agent that samples the same sensors as `amdahl run`, attributes the
//! energy to cgroups, Slurm jobs, users and processes (`amdahl_meter::attribution`), and serves
//! OpenMetrics text on `/metrics` for Prometheus.
//!
//! Threads: the sampler takes a snapshot of the attribution once per interval; the text is
//! rendered from it when a scrape asks (on tokio's blocking pool, off the server thread) and kept
//! until the next snapshot, so a node scraped every
//! 15 s renders once per scrape, not once per 1 s sample (rendering ~290 kB for 500 processes
//! costs more than sampling them: scripts/bench/exporter.sh); the server thread runs hyper on a single-threaded tokio runtime, each connection a task of its own
//! ([`http`]: at most [`http::MAX_CONNECTIONS`] at once, idle ones giving way to newcomers,
//! every request bounded in size and time),
//! so a client that sends or reads slowly holds only its own connection; the main thread waits
//! for the stop.

pub mod http;

use amdahl_meter::attribution::gpu::GpuUsageSource;
use amdahl_meter::attribution::{procs::ProcFs, Attributor, Options, Snapshot};
use amdahl_meter::estimate::Target;
use amdahl_meter::gpu::parse_visible;
use amdahl_meter::hwmon::AmdVisible;
use amdahl_meter::{rapl, sampler, sensors, Meter};
use anyhow::{anyhow, Context, Result};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default address: loopback only, port 9675 (next to Scaphandre's 8080 and node_exporter's
/// 9100 in spirit; unassigned on the Prometheus default port allocation wiki page).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9675";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Serve /metrics on this address and port [default: 127.0.0.1:9675; port 0 picks one].
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Allow a --listen address other than loopback (the metrics name users, jobs and processes).
    #[arg(long)]
    pub allow_remote: bool,
    /// Sample the sensors this often.
    #[arg(long, default_value = "1s", value_parser = crate::domain::interval)]
    pub interval: Duration,
    #[command(flatten)]
    pub powercap: super::measure_args::PowercapArgs,
    /// Root of the proc filesystem (the host's /proc bind-mounted into a container; tests).
    #[arg(
        long,
        env = "AMDAHL_PROC_ROOT",
        default_value = "/proc",
        value_name = "DIR"
    )]
    pub proc_root: PathBuf,
    /// Read each process's user, cgroup and job again after this long (also at every exec);
    /// `0s` reads them every sample, seeing moves between cgroups at once at ~4× the /proc reads.
    #[arg(long, default_value = "10s", value_parser = crate::domain::duration_or_zero, value_name = "DURATION")]
    pub proc_refresh: Duration,
    /// Do not open NVML.
    #[arg(long)]
    pub no_gpu: bool,
    /// Leave out per-process series (keep cgroup, job and user series only).
    #[arg(long)]
    pub no_process_series: bool,
    /// At most this many processes get a series of their own (by CPU time); the others are
    /// summed in one `pid="other"` series.
    #[arg(long, default_value_t = amdahl_meter::attribution::DEFAULT_MAX_PROCESS_SERIES, value_name = "N", value_parser = crate::domain::natural_usize)]
    pub max_process_series: usize,
    /// Add each process's command line as a label (off by default: arguments can hold secrets).
    #[arg(long)]
    pub expose_cmdline: bool,
    /// Keep the series of an ended cgroup, job, user or process this long, then fold its energy
    /// into its scope's `(ended)` series (bounds memory and scrape size).
    #[arg(long, default_value = "5m", value_parser = crate::domain::duration_or_zero, value_name = "DURATION")]
    pub retain: Duration,
    /// Print the metrics once, one interval after the start, and exit (no server).
    #[arg(long)]
    pub once: bool,
    /// Stop after this long [default: until SIGINT or SIGTERM].
    #[arg(long, value_parser = crate::domain::duration)]
    pub duration: Option<Duration>,
    /// Write the address actually bound (`IP:PORT`) to this file once serving.
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
}

/// The latest snapshot not rendered yet, and the text last rendered, each with the number of
/// the sample it came from (renders can finish out of order; the newest text wins).
#[derive(Default)]
struct Metrics {
    pending: Option<(u64, Snapshot)>,
    text: (u64, Arc<String>),
    taken: u64,
}

type Shared = Arc<Mutex<Metrics>>;

pub fn run(args: Args) -> Result<ExitCode> {
    if !args.proc_root.is_dir() {
        eprintln!(
            "error: --proc-root {} is not a directory (the proc filesystem, normally /proc; in a \
             container, the host's /proc bind-mounted read-only)",
            args.proc_root.display()
        );
        return Ok(ExitCode::from(2));
    }
    if !args.listen.ip().is_loopback() && !args.allow_remote && !args.once {
        eprintln!(
            "error: --listen {} is not a loopback address; the metrics name users, Slurm jobs and \
             processes, so serving them beyond this machine needs --allow-remote (and a firewall \
             or a TLS proxy in front)",
            args.listen
        );
        return Ok(ExitCode::from(2));
    }
    raise_fd_limit();
    let d = sensors::discover(sensors::Options {
        powercap_root: args.powercap.powercap_root.clone(),
        reader: rapl::fs_reader(),
        cpu_tdp: None,
        gpus: !args.no_gpu,
        visible: parse_visible(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
        hwmon_root: args.powercap.hwmon_root.clone(),
        amd_visible: AmdVisible::from_env(|k| std::env::var(k).ok()),
        amd_smi: true,
        target: Target::Machine,
    });
    for w in &d.warnings {
        eprintln!("amdahl: warning: {w}");
    }
    let mut attributor = Attributor::new(
        Box::new(ProcFs::new(&args.proc_root).with_refresh(args.proc_refresh)),
        Options {
            processes: !args.no_process_series,
            cmdline: args.expose_cmdline,
            retain_s: args.retain.as_secs_f64(),
            max_process_series: Some(args.max_process_series),
            ..Options::default()
        },
    );
    if let Some(g) = gpu_usage(&args) {
        attributor = attributor.with_gpu(g);
    }
    let shared: Shared = Arc::default();
    let out = Arc::clone(&shared);
    let s = sampler::start(
        Meter::new(d.sources),
        args.interval,
        Box::new(move |meter, sample| {
            attributor.step(sample.t_s.get(), &meter.energies());
            let mut snap = attributor.snapshot();
            snap.device_notes = meter.incomplete();
            let mut g = out.lock().unwrap_or_else(|p| p.into_inner());
            g.taken += 1;
            g.pending = Some((g.taken, snap));
        }),
    );
    if args.once {
        std::thread::sleep(args.interval);
        s.stop().context("stopping the sampler")?;
        if let Some((n, snap)) = take_pending(&shared) {
            store(&shared, n, render(&snap));
        }
        let text = latest(&shared);
        crate::output::print(&text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let served = serve(&args, &shared);
    s.stop().context("stopping the sampler")?;
    served.map(|_| ExitCode::SUCCESS)
}

/// Raise the soft limit on open files to the hard limit. The soft limit is only a default
/// (1024 under systemd, often 256 in a login shell) and the hard limit the policy; the server's
/// sockets are bounded ([`http`]: at most [`http::MAX_CONNECTIONS`] + [`http::MAX_REFUSING`]),
/// but the RAPL files, `/proc` and NVML need descriptors too, and with 256 a flood of sockets
/// once left the sensors unreadable. Failing to raise it changes nothing, so it is not an error.
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    // An unlimited hard limit is refused above fs.nr_open (1,048,576 by default, proc(5)).
    for want in [hard, 1 << 20] {
        if want > soft && setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_ok() {
            return;
        }
    }
}

/// Per-process GPU usage, for splitting GPU energy: NVML for NVIDIA GPUs, the amdgpu KFD tree
/// beside the hwmon root (`/sys/class/kfd/kfd`) for AMD GPUs. None without either or with
/// `--no-gpu`: GPU energy then stays unattributed, as `amdahl_gpu_attribution_rule` says.
fn gpu_usage(args: &Args) -> Option<Box<dyn GpuUsageSource>> {
    if args.no_gpu {
        return None;
    }
    let mut all = Vec::new();
    all.extend(amdahl_meter::attribution::gpu::nvml_usage().ok());
    match amdahl_meter::attribution::kfd::kfd_usage(
        &args.powercap.hwmon_root,
        rapl::fs_reader(),
        &AmdVisible::from_env(|k| std::env::var(k).ok()),
    ) {
        Ok(src) => all.extend(src),
        Err(e) => eprintln!(
            "amdahl: warning: AMD GPU energy is not attributed to processes (it stays \
             unattributed): {e}"
        ),
    }
    (!all.is_empty())
        .then(|| Box::new(amdahl_meter::attribution::gpu::Chain(all)) as Box<dyn GpuUsageSource>)
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Metrics> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

fn take_pending(shared: &Shared) -> Option<(u64, Snapshot)> {
    lock(shared).pending.take()
}

fn latest(shared: &Shared) -> Arc<String> {
    Arc::clone(&lock(shared).text.1)
}

/// Render a snapshot (None, with a warning on stderr, if it fails: the previous text stays).
fn render(snap: &Snapshot) -> Option<String> {
    match amdahl_report::exporter::render(snap) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("amdahl: warning: rendering the metrics: {e}");
            None
        }
    }
}

/// Keep the text of sample `n` unless a newer one is kept already.
fn store(shared: &Shared, n: u64, text: Option<String>) {
    let mut g = lock(shared);
    if let Some(t) = text.filter(|_| n > g.text.0) {
        g.text = (n, Arc::new(t));
    }
}

/// The metrics text of the latest sample. A sample not rendered yet is rendered now, by the
/// scrape that finds it, on tokio's blocking pool: rendering 30,000 processes' series took
/// ~760 ms, which on the server's one thread stalled every other connection. Scrapes arriving
/// meanwhile get the previous sample's text; rendering stays once per scrape, not per sample.
async fn current(shared: Shared) -> Arc<String> {
    let Some((n, snap)) = take_pending(&shared) else {
        return latest(&shared);
    };
    let s = Arc::clone(&shared);
    let job = tokio::task::spawn_blocking(move || store(&s, n, render(&snap)));
    // A render that panicked or was cancelled leaves the previous text.
    let _ = job.await;
    latest(&shared)
}

fn serve(args: &Args, shared: &Shared) -> Result<()> {
    let listener = std::net::TcpListener::bind(args.listen).with_context(|| {
        format!(
            "cannot listen on {} (is another exporter running? pick another port with --listen)",
            args.listen
        )
    })?;
    let bound = listener.local_addr().context("reading the address bound")?;
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
    // SIGHUP (a closed terminal, `systemctl reload`, a log rotator) and SIGUSR1/2 (sent by
    // mistake, or by tools probing a daemon) terminate a process by default, killing the
    // exporter without its clean stop; it has nothing to reload, so they are noted and ignored.
    let ignored = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGUSR2,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&ignored))
            .context("installing signal handlers")?;
    }
    let metrics = Arc::clone(shared);
    let handler: http::Handler = Arc::new(move |req: &http::Request| answer(req, &metrics));
    // The server blocks on its own thread; this one watches for the stop and leaves (the
    // process then exits, ending that thread and any connection still open).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("amdahl-accept".into())
        .spawn(move || {
            let _ = tx.send(http::serve(listener, handler));
        })
        .context("starting the accept thread")?;
    let deadline = args.duration.map(|d| Instant::now() + d);
    while !stop.load(Ordering::SeqCst) && deadline.is_none_or(|d| Instant::now() < d) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(e) => return Err(anyhow!("accepting connections on {bound}: {e}")),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(anyhow!("the accept thread on {bound} ended"))
            }
        }
    }
    Ok(())
}

/// Answer one request: `/metrics` (GET, HEAD), `/` (a pointer to it), 405 for other methods
/// there, 404 elsewhere. Oversized or malformed requests never get here ([`http`]).
fn answer(req: &http::Request, shared: &Shared) -> http::Reply {
    use http::Response;
    let path = req.target.split(['?', '#']).next().unwrap_or("");
    let readable = matches!(req.method, "GET" | "HEAD");
    let now = |r: Response| -> http::Reply { Box::pin(std::future::ready(r)) };
    now(match (path, readable) {
        ("/metrics", true) => {
            let shared = Arc::clone(shared);
            return Box::pin(async move {
                Response {
                    status: 200,
                    headers: vec![(
                        "Content-Type",
                        amdahl_report::exporter::CONTENT_TYPE.to_string(),
                    )],
                    body: current(shared).await,
                }
            });
        }
        ("/", true) => Response::text(
            200,
            "amdahl exporter: energy per node, cgroup, Slurm job, user and process at /metrics\n",
        ),
        ("/metrics" | "/", false) => {
            let mut r = Response::text(405, "method not allowed: use GET or HEAD\n");
            r.headers.push(("Allow", "GET, HEAD".into()));
            r
        }
        _ => Response::text(404, "not found: metrics are at /metrics\n"),
    })
}
