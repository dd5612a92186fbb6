//! The result as JSON (schema amdahl.run/1), rewritten after every sample (`partial: true`
//! until the end), so a killed run leaves a valid file.

use super::{file, RecordSink, SinkError, Start};
use crate::record::RunRecord;
use crate::Sample;
use std::path::{Path, PathBuf};

/// `amdahl run -o FILE`.
pub struct JsonRecord {
    path: PathBuf,
}

impl JsonRecord {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JsonRecord { path: path.into() }
    }
}

/// The record as the JSON every result is written as (pretty, with a final newline).
pub fn to_json(r: &RunRecord) -> Result<String, SinkError> {
    let mut s = serde_json::to_string_pretty(r)
        .map_err(|e| SinkError::caused("serialising the result", e))?;
    s.push('\n');
    Ok(s)
}

/// Rewrite `path` with `text`, except before the end (`last` false) when it is a FIFO or a
/// device (`-o /dev/stdout`): that gets one document, the final one, rather than one per sample.
pub(crate) fn rewrite(
    path: &Path,
    last: bool,
    text: impl FnOnce() -> Result<String, SinkError>,
) -> Result<(), SinkError> {
    if !last && file::is_stream(path) {
        return Ok(());
    }
    file::write(path, &text()?)
}

impl RecordSink for JsonRecord {
    fn open(&mut self, start: &Start<'_>) -> Result<Vec<String>, SinkError> {
        rewrite(&self.path, false, || to_json(start.record))
            .map_err(|e| e.context(super::BEFORE_START))?;
        Ok(Vec::new())
    }

    fn sample(&mut self, _: &Sample, record: &RunRecord) -> Result<(), SinkError> {
        rewrite(&self.path, false, || to_json(record))
    }

    fn finish(&mut self, record: &RunRecord, _ran: bool) -> Result<(), SinkError> {
        rewrite(&self.path, true, || to_json(record))
    }
}
