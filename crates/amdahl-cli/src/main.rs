//! The `amdahl` binary. Everything lives in the library target (`lib.rs`), which the Python
//! package calls too, so `pip install amdahl` gives the same command.

fn main() -> std::process::ExitCode {
    amdahl_cli::run_argv(std::env::args_os())
}
