//! Where a measurement's record goes while the work runs and when it ends: the JSON result
//! ([`json`]), the CodeCarbon CSV with its recovery of killed runs ([`codecarbon`]), the
//! Prometheus textfile ([`textfile`]) and the sample log ([`samples`]), each a [`RecordSink`]
//! that a [`crate::session::Session`] drives. Formats that are renderings (the CodeCarbon row,
//! the Prometheus text) are passed in by the caller: rendering belongs to `amdahl-report`, which
//! depends on this crate.

pub mod codecarbon;
pub mod file;
pub mod json;
pub mod samples;
pub mod textfile;

use crate::record::RunRecord;
use crate::{DeviceInfo, Sample};

/// One output of a measurement. A session calls [`open`](RecordSink::open) before the work
/// starts (so a bad path fails before anything runs), [`sample`](RecordSink::sample) after
/// every sample with the partial record, and [`finish`](RecordSink::finish) once with the final
/// one.
pub trait RecordSink: Send {
    /// Create the output. Returns notes for the user (the CodeCarbon rows recovered).
    fn open(&mut self, start: &Start<'_>) -> Result<Vec<String>, SinkError>;
    /// Take the partial record after a sample. A failure is reported and does not stop the
    /// measurement.
    fn sample(&mut self, sample: &Sample, record: &RunRecord) -> Result<(), SinkError>;
    /// Take the final record. `ran`: whether the work ran at all (one that never started has
    /// no CodeCarbon row).
    fn finish(&mut self, record: &RunRecord, ran: bool) -> Result<(), SinkError>;
}

/// What the sinks see before the work starts.
pub struct Start<'a> {
    /// The record with nothing measured yet.
    pub record: &'a RunRecord,
    /// The devices the meter reads.
    pub devices: &'a [DeviceInfo],
}

/// The context of an output that fails as the session opens it.
pub(crate) const BEFORE_START: &str =
    "cannot write an output file before starting the command (fix the path or its permissions)";

/// A record the sink's format renders (the Prometheus text, a CodeCarbon row).
pub type Render<T> = fn(&RunRecord) -> Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// An output that could not be written: what was being done (with the path), and why.
#[derive(Debug)]
pub struct SinkError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl SinkError {
    pub fn new(message: impl Into<String>) -> Self {
        SinkError {
            message: message.into(),
            source: None,
        }
    }

    /// `message` caused by `source` (printed "message: source" in a context chain).
    pub fn caused(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        SinkError {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// This error as the cause of `message` (what the caller was doing).
    pub fn context(self, message: impl Into<String>) -> Self {
        SinkError::caused(message, self)
    }
}

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Extension for results: a context message, as the CLI's `anyhow` would add.
pub(crate) trait Context<T> {
    fn context_with(self, message: impl FnOnce() -> String) -> Result<T, SinkError>;
}

impl<T, E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> Context<T> for Result<T, E> {
    fn context_with(self, message: impl FnOnce() -> String) -> Result<T, SinkError> {
        self.map_err(|e| SinkError::caused(message(), e))
    }
}
