//! The background sampler: reads the meter every interval on its own thread and hands each
//! sample to a callback (the CLI writes the log and the partial result there).

use crate::meter::{Meter, Sample};
use crate::MeterError;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub type OnSample = Box<dyn FnMut(&Meter, &Sample) + Send>;

pub struct Sampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<Meter>,
}

/// Take a first sample now, on the caller's thread (so it precedes whatever the caller starts
/// next), then one every `interval` on a background thread (on a fixed grid, so waits do not
/// drift), until [`Sampler::stop`].
pub fn start(mut meter: Meter, interval: Duration, mut on_sample: OnSample) -> Sampler {
    let (stop, rx) = mpsc::channel::<()>();
    meter.restart_clock();
    let first = meter.sample();
    on_sample(&meter, &first);
    let t0 = Instant::now();
    let handle = std::thread::spawn(move || {
        let mut k: u32 = 1;
        loop {
            let due = grid(t0, interval, k);
            let wait = due.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Err(RecvTimeoutError::Timeout) => {
                    let s = meter.sample();
                    on_sample(&meter, &s);
                    k = k.saturating_add(1);
                    // After a stall, skip the missed grid points rather than burst.
                    while grid(t0, interval, k) <= Instant::now() {
                        k = k.saturating_add(1);
                    }
                }
                _ => break,
            }
        }
        let last = meter.sample();
        on_sample(&meter, &last);
        meter
    });
    Sampler { stop, handle }
}

/// The k-th grid point after `t0`, saturating instead of overflowing on absurd run lengths.
fn grid(t0: Instant, interval: Duration, k: u32) -> Instant {
    t0.checked_add(interval.saturating_mul(k))
        .unwrap_or_else(|| Instant::now() + interval)
}

impl Sampler {
    /// Take a final sample and return the meter.
    pub fn stop(self) -> Result<Meter, MeterError> {
        let _ = self.stop.send(());
        self.handle.join().map_err(|_| MeterError::SamplerPanicked)
    }
}
