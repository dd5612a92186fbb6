//! The sample log: a header line (run id, devices), then every sample as a JSON line, flushed
//! as it is taken.

use super::{Context as _, RecordSink, SinkError, Start};
use crate::meter::SampleLogHeader;
use crate::record::RunRecord;
use crate::Sample;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// `amdahl run --log FILE`.
pub struct SampleLog {
    path: PathBuf,
    file: Option<File>,
}

impl SampleLog {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SampleLog {
            path: path.into(),
            file: None,
        }
    }
}

impl RecordSink for SampleLog {
    fn open(&mut self, start: &Start<'_>) -> Result<Vec<String>, SinkError> {
        let p = &self.path;
        let mut f = File::create(p).context_with(|| {
            format!(
                "cannot write the sample log {} (fix the path or its permissions)",
                p.display()
            )
        })?;
        let head = SampleLogHeader::new(&start.record.run_id, start.devices.to_vec());
        let head = serde_json::to_string(&head)
            .context_with(|| "serialising the sample log header".into())?;
        writeln!(f, "{head}").context_with(|| format!("writing {}", p.display()))?;
        self.file = Some(f);
        Ok(Vec::new())
    }

    fn sample(&mut self, sample: &Sample, _: &RunRecord) -> Result<(), SinkError> {
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let line = serde_json::to_string(sample).unwrap_or_default();
        writeln!(f, "{line}")
            .and_then(|_| f.flush())
            .map_err(|e| SinkError::new(format!("sample log {}: {e}", self.path.display())))
    }

    fn finish(&mut self, _: &RunRecord, _ran: bool) -> Result<(), SinkError> {
        Ok(())
    }
}
