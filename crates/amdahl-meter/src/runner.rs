//! Running the measured command: spawn it in its own process group, forward signals to that
//! group, wait, and map its status to the exit code a shell would give (`128 + signal` when
//! killed, as bash does: SIGKILL → 137).
//!
//! Signals (documented in docs/usage/run.md): amdahl catches every signal in [`FORWARDED`]
//! and passes it on to the command's whole process group (`sh -c 'sleep 60; echo'`: the
//! `sleep` gets it too), then keeps waiting, so the final record is always written when the
//! command exits. The terminating ones ([`TERMINATING`]) mark the record interrupted; SIGUSR1
//! and SIGUSR2 (Slurm's checkpoint signals) are only forwarded and noted. SIGKILL and SIGSTOP
//! cannot be caught: after SIGKILL the files already written survive (see run.md).

use crate::MeterError;
use amdahl_model::units::{Bytes, Seconds};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Process group of the running command (its pid), 0 when none runs.
static CHILD_PGID: AtomicI32 = AtomicI32::new(0);
/// The first terminating signal received.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);
/// Bit `n` set: signal `n` was received (and forwarded) at least once.
static RECEIVED: AtomicU64 = AtomicU64::new(0);
/// Whether the command's group was given the terminal, to take it back after it exits.
static HANDED_TERMINAL: AtomicBool = AtomicBool::new(false);

/// Signals amdahl catches and forwards to the command's process group.
pub const FORWARDED: [i32; 9] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGXCPU,
    libc::SIGXFSZ,
];

/// Of those, the ones whose default action ends a process: receiving one marks the record
/// interrupted (`partial: true`, `interrupted_by`).
pub const TERMINATING: [i32; 7] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGALRM,
    libc::SIGXCPU,
    libc::SIGXFSZ,
];

/// Note a signal and pass it on to the command's group (or, before the command exists,
/// leave it for [`spawn_with`] to deliver).
fn on_signal(sig: i32) {
    if (0..64).contains(&sig) {
        RECEIVED.fetch_or(1 << sig, Ordering::SeqCst);
    }
    if TERMINATING.contains(&sig) {
        let _ = INTERRUPTED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    }
    forward(sig);
}

fn forward(sig: i32) {
    let pgid = CHILD_PGID.load(Ordering::SeqCst);
    if let (true, Ok(s)) = (pgid > 0, Signal::try_from(sig)) {
        // The group may have just exited: ESRCH is fine.
        let _ = killpg(Pid::from_raw(pgid), s);
    }
}

/// Catch [`FORWARDED`] for the rest of the process (idempotent). The handlers only write to a
/// pipe (signal-hook); a thread reads it, notes the signal and forwards it, so amdahl outlives
/// every catchable signal long enough to record the result.
pub fn install_forwarding() -> Result<(), MeterError> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let mut signals =
                signal_hook::iterator::Signals::new(FORWARDED).map_err(|e| e.to_string())?;
            std::thread::Builder::new()
                .name("amdahl-signals".into())
                .spawn(move || {
                    for sig in signals.forever() {
                        on_signal(sig);
                    }
                })
                .map_err(|e| e.to_string())?;
            Ok(())
        })
        .clone()
        .map_err(MeterError::Signals)
}

/// The terminating signal amdahl received while the command ran, if any.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Every signal amdahl received and forwarded so far, in [`FORWARDED`] order.
pub fn received() -> Vec<i32> {
    let mask = RECEIVED.load(Ordering::SeqCst);
    FORWARDED
        .iter()
        .copied()
        .filter(|&s| mask & (1 << s) != 0)
        .collect()
}

pub fn signal_name(sig: i32) -> String {
    match Signal::try_from(sig) {
        Ok(s) => s.as_str().to_string(),
        Err(_) => format!("signal {sig}"),
    }
}

/// Start the command with inherited stdio. amdahl first becomes a child subreaper
/// (`prctl(PR_SET_CHILD_SUBREAPER)`, Linux ≥ 3.4): descendants the command orphans (`cmd &` in a
/// shell that exits) are re-parented to amdahl instead of init, so their CPU time is still seen
/// and, once reaped by [`wait`], is inside `RUSAGE_CHILDREN`.
pub fn spawn(argv: &[String]) -> Result<Child, MeterError> {
    spawn_stdio(argv, &[], Stdout::Inherit)
}

/// [`spawn`] with the command's stdout piped to the caller (`child.stdout`), who must read it
/// until its end (`amdahl run --progress-regex` copies it through, see
/// [`crate::stdout_progress`]). Its stderr and stdin stay amdahl's.
pub fn spawn_piping_stdout(argv: &[String]) -> Result<Child, MeterError> {
    spawn_stdio(argv, &[], Stdout::Piped)
}

/// Where the command's output goes.
#[derive(Clone, Copy, PartialEq)]
enum Stdout {
    /// amdahl's own stdout and stderr (the terminal, a file).
    Inherit,
    /// stdout piped to the caller.
    Piped,
    /// stdout discarded, stderr piped to the caller.
    Quiet,
}

/// [`spawn`] with extra environment variables; with `quiet`, the command's stdout is discarded
/// and its stderr piped to the caller (who keeps its tail for error reports), as hyperfine does
/// for repeated runs.
///
/// The command runs in its own process group, so forwarded signals reach everything it starts.
/// When amdahl owns the terminal's foreground (an interactive shell started it), that group is
/// made the foreground, as a shell does for a job: Ctrl-C and terminal reads go to the command
/// directly. A file without `#!` that the kernel will not execute (ENOEXEC) is run by
/// `/bin/sh`, as `execvp(3)` and every POSIX shell do.
pub fn spawn_with(
    argv: &[String],
    env: &[(String, String)],
    quiet: bool,
) -> Result<Child, MeterError> {
    spawn_stdio(
        argv,
        env,
        if quiet {
            Stdout::Quiet
        } else {
            Stdout::Inherit
        },
    )
}

fn spawn_stdio(
    argv: &[String],
    env: &[(String, String)],
    stdout: Stdout,
) -> Result<Child, MeterError> {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let Some((program, args)) = argv.split_first() else {
        return Err(MeterError::CommandNotFound {
            program: String::new(),
        });
    };
    let build = |argv0: &str, rest: &[&str]| {
        let mut cmd = Command::new(argv0);
        cmd.args(rest).envs(env.iter().map(|(k, v)| (k, v)));
        cmd.process_group(0);
        match stdout {
            Stdout::Inherit => {}
            Stdout::Piped => {
                cmd.stdout(Stdio::piped());
            }
            Stdout::Quiet => {
                cmd.stdout(Stdio::null()).stderr(Stdio::piped());
            }
        }
        cmd
    };
    let rest: Vec<&str> = args.iter().map(String::as_str).collect();
    let spawned = match build(program, &rest).spawn() {
        Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => {
            let mut sh_args = vec![program.as_str()];
            sh_args.extend(&rest);
            build("/bin/sh", &sh_args).spawn()
        }
        other => other,
    };
    let child = spawned.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => MeterError::CommandNotFound {
            program: program.clone(),
        },
        std::io::ErrorKind::PermissionDenied => MeterError::CommandNotExecutable {
            program: program.clone(),
        },
        _ => MeterError::Spawn {
            program: program.clone(),
            source: e,
        },
    })?;
    let pgid = child.id() as i32;
    CHILD_PGID.store(pgid, Ordering::SeqCst);
    give_terminal(pgid);
    // A signal that arrived before the command existed had no group to go to.
    for sig in received() {
        forward(sig);
    }
    Ok(child)
}

/// Make `pgid` the terminal's foreground group when amdahl's own group is the foreground now
/// (stdin is the terminal of an interactive shell). SIGCONT wakes the command if it already
/// tried to read the terminal from the background and was stopped for it (SIGTTIN).
fn give_terminal(pgid: i32) {
    use nix::unistd::{getpgrp, tcgetpgrp, tcsetpgrp};
    let stdin = std::io::stdin();
    if !std::io::IsTerminal::is_terminal(&stdin) {
        return;
    }
    if tcgetpgrp(&stdin).ok() != Some(getpgrp()) {
        return;
    }
    if tcsetpgrp(&stdin, Pid::from_raw(pgid)).is_ok() {
        HANDED_TERMINAL.store(true, Ordering::SeqCst);
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGCONT);
    }
}

/// Take the terminal back for amdahl's group once the command is done. amdahl is then a
/// background group, and the kernel stops a background `tcsetpgrp` caller with SIGTTOU unless
/// that signal is blocked, so it is blocked on this thread around the call.
fn take_terminal_back() {
    use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow};
    if !HANDED_TERMINAL.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut set = SigSet::empty();
    set.add(Signal::SIGTTOU);
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
    let _ = nix::unistd::tcsetpgrp(std::io::stdin(), nix::unistd::getpgrp());
    let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
}

/// Wait for the command to end, with job control when it holds the terminal: Ctrl-Z stops the
/// command's group, so amdahl takes the terminal back and stops itself too, and the shell gets
/// its prompt; on `fg` (SIGCONT) amdahl hands the terminal over again and continues the command.
fn wait_job(child: &mut Child) -> Result<std::process::ExitStatus, MeterError> {
    use nix::errno::Errno;
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let pid = Pid::from_raw(child.id() as i32);
    loop {
        match waitpid(pid, Some(WaitPidFlag::WUNTRACED)) {
            // Rebuild the raw wait status (wait(2) layout) for std's ExitStatus.
            Ok(WaitStatus::Exited(_, code)) => {
                return Ok(std::process::ExitStatus::from_raw((code & 0xff) << 8))
            }
            Ok(WaitStatus::Signaled(_, sig, core)) => {
                let raw = sig as i32 | if core { 0x80 } else { 0 };
                return Ok(std::process::ExitStatus::from_raw(raw));
            }
            Ok(WaitStatus::Stopped(..)) if HANDED_TERMINAL.load(Ordering::SeqCst) => {
                take_terminal_back();
                let _ = nix::sys::signal::raise(Signal::SIGSTOP);
                // Continued: in the foreground again (`fg`) the command gets the terminal back;
                // in the background (`bg`) it only continues.
                give_terminal(pid.as_raw());
                let _ = killpg(pid, Signal::SIGCONT);
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(MeterError::Wait(e.into())),
        }
    }
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finished {
    /// What a shell reports: the exit status, or 128 + signal.
    pub exit_code: i32,
    /// The signal that killed the command, if one did.
    pub signal: Option<i32>,
    /// User + system CPU time of the command and its waited-for descendants.
    pub cpu: Seconds,
    /// Peak resident set of the largest of them.
    pub max_rss: Bytes,
}

/// Exit code a shell gives for this status.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 1,
    }
}

/// Wait for the command, then read its resource usage. With `reap_orphans`, also reap every
/// already-exited child of this process — the command's orphans re-parented to us as subreaper —
/// so their CPU time enters `RUSAGE_CHILDREN`; only pass true when this process has no other
/// children of its own (the `amdahl` binary), since they would be reaped too.
pub fn wait(child: &mut Child, reap_orphans: bool) -> Result<Finished, MeterError> {
    let status = wait_job(child);
    take_terminal_back();
    let status = status?;
    CHILD_PGID.store(0, Ordering::SeqCst);
    if reap_orphans {
        use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
        // WNOHANG reaps only children that already exited.
        while let Ok(st) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if st == WaitStatus::StillAlive {
                break;
            }
        }
    }
    use nix::sys::resource::{getrusage, UsageWho};
    use nix::sys::time::TimeValLike;
    let ru = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(|e| MeterError::Wait(e.into()))?;
    let tv = |t: nix::sys::time::TimeVal| t.num_microseconds() as f64 / 1e6;
    Ok(Finished {
        exit_code: exit_code(status),
        signal: status.signal(),
        cpu: Seconds(tv(ru.user_time()) + tv(ru.system_time())),
        // Linux reports ru_maxrss in KiB.
        max_rss: Bytes(ru.max_rss() as f64 * 1024.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cmd: &str) -> Finished {
        let mut c = spawn(&["sh".into(), "-c".into(), cmd.into()]).unwrap();
        wait(&mut c, false).unwrap()
    }

    #[test]
    fn exit_codes_like_a_shell() {
        assert_eq!(run("exit 0").exit_code, 0);
        assert_eq!(run("exit 1").exit_code, 1);
        let k = run("kill -9 $$");
        assert_eq!((k.exit_code, k.signal), (137, Some(9)));
    }

    #[test]
    fn script_without_shebang_runs_like_a_shell_would() {
        // execvp(3) and shells run a file the kernel rejects (ENOEXEC) with /bin/sh.
        let t = tempfile::tempdir().unwrap();
        let script = t.path().join("noshebang");
        std::fs::write(&script, "exit 7\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = spawn(&[script.to_string_lossy().into_owned()]).unwrap();
        assert_eq!(wait(&mut c, false).unwrap().exit_code, 7);
    }

    #[test]
    fn command_runs_in_its_own_process_group() {
        let mut c = spawn(&[
            "sh".into(),
            "-c".into(),
            "test \"$(cut -d' ' -f5 /proc/$$/stat)\" = $$".into(),
        ])
        .unwrap();
        assert_eq!(wait(&mut c, false).unwrap().exit_code, 0);
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGUSR1), "SIGUSR1");
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(99), "signal 99");
    }

    #[test]
    fn missing_command_is_named() {
        let e = spawn(&["amdahl-no-such-command-xyz".into()]).unwrap_err();
        assert!(matches!(e, MeterError::CommandNotFound { .. }));
        assert!(e.to_string().contains("amdahl-no-such-command-xyz"));
    }
}
