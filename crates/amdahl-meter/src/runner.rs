//! Running the measured command: spawn, forward SIGINT/SIGTERM, wait, and map its status to the
//! exit code a shell would give (`128 + signal` when killed, as bash does: SIGKILL → 137).

use crate::MeterError;
use amdahl_model::units::{Bytes, Seconds};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

static CHILD_PID: AtomicI32 = AtomicI32::new(0);
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// Signal handler: remember the signal and pass it on to the child. A signal sent by a process
/// (`kill`, Slurm, a scheduler: `si_code <= 0`) reached only us, so it is forwarded; one from the
/// kernel (Ctrl-C on a terminal: `si_code > 0`) already reached the whole foreground process
/// group, child included, and forwarding it would deliver it twice.
extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    INTERRUPTED.store(sig, Ordering::SeqCst);
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let from_process = info.is_null() || unsafe { (*info).si_code } <= 0;
    let pid = CHILD_PID.load(Ordering::SeqCst);
    if from_process && pid > 0 {
        // SAFETY: kill is async-signal-safe; pid > 0 names only the child.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Install the forwarding handler for SIGINT and SIGTERM (amdahl then outlives the signal long
/// enough to record the partial result).
pub fn install_forwarding() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a valid handler and empty mask is well-formed.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal amdahl received (SIGINT, SIGTERM) while the command ran, if any.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        n => format!("signal {n}"),
    }
}

/// Start the command with inherited stdio. amdahl first becomes a child subreaper
/// (`prctl(PR_SET_CHILD_SUBREAPER)`, Linux ≥ 3.4): descendants the command orphans (`cmd &` in a
/// shell that exits) are re-parented to amdahl instead of init, so their CPU time is still seen
/// and, once reaped by [`wait`], is inside `RUSAGE_CHILDREN`.
pub fn spawn(argv: &[String]) -> Result<Child, MeterError> {
    spawn_with(argv, &[], false)
}

/// [`spawn`] with extra environment variables; with `quiet`, the command's stdout is discarded
/// and its stderr piped to the caller (who keeps its tail for error reports), as hyperfine does
/// for repeated runs.
pub fn spawn_with(
    argv: &[String],
    env: &[(String, String)],
    quiet: bool,
) -> Result<Child, MeterError> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes one integer argument; failure is harmless.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
    }
    let Some((program, args)) = argv.split_first() else {
        return Err(MeterError::CommandNotFound {
            program: String::new(),
        });
    };
    let mut cmd = Command::new(program);
    cmd.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    if quiet {
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    }
    let child = cmd.spawn().map_err(|e| match e.kind() {
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
    CHILD_PID.store(child.id() as i32, Ordering::SeqCst);
    // A signal that arrived between installing the handler and now had no child to go to.
    if let Some(sig) = interrupted() {
        // SAFETY: the pid is our live child.
        unsafe {
            libc::kill(child.id() as libc::pid_t, sig);
        }
    }
    Ok(child)
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
    let status = child.wait().map_err(MeterError::Wait)?;
    CHILD_PID.store(0, Ordering::SeqCst);
    if reap_orphans {
        // SAFETY: waitpid with a null status pointer and WNOHANG only reaps exited children.
        while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
    }
    // SAFETY: getrusage fills the zeroed struct.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Finished {
        exit_code: exit_code(status),
        signal: status.signal(),
        cpu: Seconds(tv(ru.ru_utime) + tv(ru.ru_stime)),
        // Linux reports ru_maxrss in KiB.
        max_rss: Bytes(ru.ru_maxrss as f64 * 1024.0),
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
    fn missing_command_is_named() {
        let e = spawn(&["amdahl-no-such-command-xyz".into()]).unwrap_err();
        assert!(matches!(e, MeterError::CommandNotFound { .. }));
        assert!(e.to_string().contains("amdahl-no-such-command-xyz"));
    }
}
