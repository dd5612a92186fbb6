//! The run in Prometheus text format, rewritten after every sample, for node_exporter's
//! textfile collector. The text is rendered by the caller's function (`amdahl-report`).

use super::json::rewrite;
use super::{RecordSink, SinkError, Start};
use crate::record::RunRecord;
use crate::Sample;
use std::path::PathBuf;

/// `amdahl run --prometheus FILE`.
pub struct PrometheusTextfile {
    path: PathBuf,
    render: fn(&RunRecord) -> String,
}

impl PrometheusTextfile {
    pub fn new(path: impl Into<PathBuf>, render: fn(&RunRecord) -> String) -> Self {
        PrometheusTextfile {
            path: path.into(),
            render,
        }
    }

    fn write(&self, r: &RunRecord, last: bool) -> Result<(), SinkError> {
        rewrite(&self.path, last, || Ok((self.render)(r))).map_err(|e| {
            e.context(format!(
                "writing the Prometheus textfile {}",
                self.path.display()
            ))
        })
    }
}

impl RecordSink for PrometheusTextfile {
    fn open(&mut self, start: &Start<'_>) -> Result<Vec<String>, SinkError> {
        self.write(start.record, false)
            .map_err(|e| e.context(super::BEFORE_START))?;
        Ok(Vec::new())
    }

    fn sample(&mut self, _: &Sample, record: &RunRecord) -> Result<(), SinkError> {
        self.write(record, false)
    }

    fn finish(&mut self, record: &RunRecord, _ran: bool) -> Result<(), SinkError> {
        self.write(record, true)
    }
}
