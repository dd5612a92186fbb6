//! The background sampler: reads the meter every interval on its own thread and hands each
//! sample to a callback (the CLI writes the log and the partial result there).

use crate::meter::{Meter, Sample};
use crate::MeterError;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub type OnSample = Box<dyn FnMut(&Meter, &Sample) + Send>;

/// The shortest interval the sampler accepts: 10 ms. RAPL updates its energy counters about
/// once per millisecond (Hähnel et al., "Measuring energy consumption for short code paths
/// using RAPL", SIGMETRICS PER 40(3), 2012, measured ~1 ms between updates), so a 10 ms interval still sees ~10 updates and keeps the ±1 update
/// quantisation of each interval within ~10 % of it; and every sample rewrites the result
/// files, which at 10 ms already costs a few per cent of a core. Shorter intervals measure
/// noise and spin a core (at `--interval 1e-8` the sampler never slept).
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

pub struct Sampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<Meter>,
}

/// Take a first sample now, on the caller's thread (so it precedes whatever the caller starts
/// next), then one every `interval` (at least [`MIN_INTERVAL`]) on a background thread, on a
/// fixed grid so waits do not drift, until [`Sampler::stop`]. A stop request is seen within one
/// interval, whatever happened before.
pub fn start(mut meter: Meter, interval: Duration, mut on_sample: OnSample) -> Sampler {
    let interval = interval.max(MIN_INTERVAL);
    let (stop, rx) = mpsc::channel::<()>();
    meter.restart_clock();
    let first = meter.sample();
    on_sample(&meter, &first);
    let t0 = Instant::now();
    let handle = std::thread::spawn(move || {
        // 64-bit: a 32-bit count saturated after 2^32 samples and then never advanced.
        let mut k: u64 = 1;
        loop {
            let wait = grid(t0, interval, k).saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Err(RecvTimeoutError::Timeout) => {
                    let s = meter.sample();
                    on_sample(&meter, &s);
                    // The next grid point after now: after a stall the missed ones are skipped
                    // rather than burst, computed at once rather than counted up to.
                    k = next_k(t0.elapsed(), interval).max(k.saturating_add(1));
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

/// The index of the first grid point strictly after `elapsed`.
fn next_k(elapsed: Duration, interval: Duration) -> u64 {
    let per = interval.as_nanos().max(1);
    u64::try_from(elapsed.as_nanos() / per)
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// The k-th grid point after `t0`; past what `Instant` can hold, one interval from now.
fn grid(t0: Instant, interval: Duration, k: u64) -> Instant {
    let offset = interval
        .as_nanos()
        .checked_mul(u128::from(k))
        .and_then(|n| u64::try_from(n).ok())
        .map(Duration::from_nanos);
    offset
        .and_then(|o| t0.checked_add(o))
        .unwrap_or_else(|| Instant::now() + interval)
}

impl Sampler {
    /// Take a final sample and return the meter.
    pub fn stop(self) -> Result<Meter, MeterError> {
        let _ = self.stop.send(());
        self.handle.join().map_err(|_| MeterError::SamplerPanicked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn sampler_at_tiny_interval_is_clamped_and_stops_promptly() {
        // `--interval 1e-8` used to spin forever; now it samples at most every 10 ms.
        let n = Arc::new(AtomicU64::new(0));
        let n2 = Arc::clone(&n);
        let s = start(
            Meter::new(Vec::new()),
            Duration::from_nanos(10),
            Box::new(move |_, _| {
                n2.fetch_add(1, Ordering::SeqCst);
            }),
        );
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        s.stop().unwrap();
        assert!(t.elapsed() < Duration::from_secs(1));
        // 200 ms at 10 ms: about 20 samples plus first and last; never thousands.
        let count = n.load(Ordering::SeqCst);
        assert!((3..=40).contains(&count), "{count} samples");
    }

    #[test]
    fn sample_counter_past_2_pow_32_keeps_advancing() {
        // The 32-bit counter saturated at 2^32 and the catch-up loop never ended.
        let i = Duration::from_millis(10);
        let far = i * 4_000_000_000 + i * 1_000_000_000;
        assert_eq!(next_k(far, i), 5_000_000_001);
        let t0 = Instant::now();
        assert!(grid(t0, i, 5_000_000_001) > grid(t0, i, u64::from(u32::MAX)));
        // Absurd indices do not panic or overflow.
        let _ = grid(t0, Duration::from_secs(1_000_000_000), u64::MAX);
    }
}
