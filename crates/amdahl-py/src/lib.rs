//! `amdahl._native`: the Python extension module. It only converts: Python arguments into
//! `amdahl` command lines and tracker options, results into Python objects (`pythonize`, from
//! the result's data: no JSON text is written or parsed), errors into `AmdahlError`. The measuring and modelling
//! are the Rust crates' (`amdahl_cli::embed`); the GIL is released while they run, and the
//! tracker's sampler is a Rust thread that never touches Python.

use amdahl_cli::embed::{self, Failure};
use amdahl_meter::progress::{Units, Work};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};

create_exception!(
    _native,
    AmdahlError,
    PyValueError,
    "An amdahl command or tracker refused its input; the message is the one the CLI prints."
);

fn raise(f: Failure) -> PyErr {
    AmdahlError::new_err(f.message)
}

/// A result as Python objects: what `json.loads` of its `--json` text gives (dicts, lists,
/// str, int, float, bool, None), built directly, so that tracking needs no `json` module.
fn to_python<'py, T: serde::Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let v = serde_json::to_value(value).map_err(|e| AmdahlError::new_err(e.to_string()))?;
    value_to_python(py, &v)
}

/// A result's data (`serde_json::Value`, as the CLI keeps it) as Python objects. Through the
/// `Value` rather than the typed result: a tuple in a result is a JSON array, so a list here as
/// in `json.loads`, where pythonizing the type would make it a Python tuple.
fn value_to_python<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, v).map_err(|e| AmdahlError::new_err(e.to_string()))
}

/// Run `amdahl ARGS…` (the caller passes `--json`) and return its result as Python objects, or
/// its stdout as a `str` when it printed something other than one result.
#[pyfunction]
fn call<'py>(py: Python<'py>, args: Vec<String>) -> PyResult<Bound<'py, PyAny>> {
    match py.detach(|| embed::call(&args)).map_err(raise)? {
        embed::Output::Result(v) => value_to_python(py, &v),
        embed::Output::Text(text) => Ok(pyo3::types::PyString::new(py, &text).into_any()),
    }
}

/// The `amdahl` command itself (the wheel's console script): run it on `argv` (program name
/// first) and return its exit status.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| embed::exit_status(amdahl_cli::run_argv(argv)))
}

enum State {
    Ready,
    Running(Box<embed::Tracker>),
    /// Stopped; kg CO2e per joule kept for projections asked afterwards.
    Done(f64),
}

/// The measurement behind `amdahl.Tracker`. `step()` and `epoch()` are one atomic add each
/// (no lock): the work counters live outside the state's mutex.
#[pyclass(frozen, module = "amdahl._native")]
struct NativeTracker {
    options: Vec<String>,
    command: Vec<String>,
    work: Arc<Work>,
    state: Mutex<State>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[pymethods]
impl NativeTracker {
    #[new]
    fn new(options: Vec<String>, command: Vec<String>) -> Self {
        NativeTracker {
            options,
            command,
            work: Arc::new(Work::default()),
            state: Mutex::new(State::Ready),
        }
    }

    /// Start measuring; returns the run id.
    fn start(&self, py: Python<'_>) -> PyResult<String> {
        let mut st = lock(&self.state);
        match &*st {
            State::Running(_) => {
                return Err(AmdahlError::new_err(
                    "this tracker is already running: stop() it first, or use another Tracker (nested trackers are allowed, each with its own record)",
                ))
            }
            State::Done(_) => {
                return Err(AmdahlError::new_err(
                    "this tracker has already measured a run: create a new Tracker for another one",
                ))
            }
            State::Ready => {}
        }
        let (options, command, work) = (&self.options, &self.command, Arc::clone(&self.work));
        // `platform.python_version()`, CodeCarbon's `python_version`: the first word of
        // `sys.version` ("3.11.7 (main, …)").
        let version = Python::version_str()
            .split_whitespace()
            .next()
            .map(String::from);
        let t = py
            .detach(|| embed::Tracker::start(options, command, work, version))
            .map_err(raise)?;
        let id = t.run_id().to_string();
        *st = State::Running(Box::new(t));
        Ok(id)
    }

    /// Stop, write the record, return it as a dict (schema amdahl.run/1). `exc_type` /
    /// `exc_message`: the exception that ended the block, if one did.
    #[pyo3(signature = (exc_type=None, exc_message=None))]
    fn stop<'py>(
        &self,
        py: Python<'py>,
        exc_type: Option<String>,
        exc_message: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut st = lock(&self.state);
        let t = match std::mem::replace(&mut *st, State::Ready) {
            State::Running(t) => t,
            other => {
                let msg = match other {
                    State::Done(_) => "this tracker has already been stopped",
                    _ => "stop() without start(): this tracker is not running",
                };
                *st = other;
                return Err(AmdahlError::new_err(msg));
            }
        };
        let kg = t.kg_per_joule();
        *st = State::Done(kg);
        let exit = embed::Exit {
            exception: exc_type.map(|k| (k, exc_message.unwrap_or_default())),
        };
        let rec = py.detach(|| t.stop(exit)).map_err(raise)?;
        to_python(py, &rec)
    }

    fn running(&self) -> bool {
        matches!(&*lock(&self.state), State::Running(_))
    }

    /// `n` more steps done; returns the count.
    #[pyo3(signature = (n=1))]
    fn step(&self, n: u64) -> u64 {
        self.work.steps.add(n);
        self.work.steps.done()
    }

    /// `n` more epochs done; returns the count.
    #[pyo3(signature = (n=1))]
    fn epoch(&self, n: u64) -> u64 {
        self.work.epochs.add(n);
        self.work.epochs.done()
    }

    #[pyo3(signature = (steps=None, epochs=None))]
    fn set_total(&self, steps: Option<u64>, epochs: Option<u64>) -> PyResult<()> {
        if steps == Some(0) || epochs == Some(0) {
            return Err(AmdahlError::new_err(
                "set_total: the run's total must be at least 1",
            ));
        }
        if let Some(s) = steps {
            self.work.steps.set_total(s);
        }
        if let Some(e) = epochs {
            self.work.epochs.set_total(e);
        }
        Ok(())
    }

    /// `(seconds, joules, kg CO2e)` of the run at the latest sample.
    fn so_far(&self) -> (f64, f64, f64) {
        let kg = match &*lock(&self.state) {
            State::Running(t) => t.kg_per_joule(),
            State::Done(kg) => *kg,
            State::Ready => 0.0,
        };
        let (t, e) = self.work.latest();
        (t, e, e * kg)
    }

    fn counts(&self) -> (u64, u64) {
        (self.work.steps.done(), self.work.epochs.done())
    }

    /// The whole run projected from the units so far, as a dict; `unit`: "step" or "epoch"
    /// (default: epochs when their total is set, else steps).
    #[pyo3(signature = (unit=None))]
    fn projection<'py>(
        &self,
        py: Python<'py>,
        unit: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let kg = match &*lock(&self.state) {
            State::Running(t) => t.kg_per_joule(),
            State::Done(kg) => *kg,
            State::Ready => {
                return Err(AmdahlError::new_err(
                    "projection() before start(): nothing is measured yet",
                ))
            }
        };
        let units: &Units = match unit.as_deref() {
            Some("step") | Some("steps") => &self.work.steps,
            Some("epoch") | Some("epochs") => &self.work.epochs,
            Some(u) => {
                return Err(AmdahlError::new_err(format!(
                    "projection(unit={u:?}): the unit is \"step\" or \"epoch\""
                )))
            }
            None if self.work.epochs.total().is_some() => &self.work.epochs,
            None => &self.work.steps,
        };
        let p = units
            .projection()
            .map_err(|e| AmdahlError::new_err(e.to_string()))?
            .with_carbon(kg);
        to_python(py, &p)
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("AmdahlError", m.py().get_type::<AmdahlError>())?;
    // The crate's version is the CLI's and the records' (`amdahl_version`): one number.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(call, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_class::<NativeTracker>()?;
    Ok(())
}
