//! `amdahl run --progress-regex RE`: the command's stdout passes through amdahl, byte for byte,
//! and every line of it that matches `RE` counts as progress for the projection
//! ([`crate::progress`]), so a job that already prints `step 1200` needs no change at all.
//!
//! The copy comes first: each chunk the pipe yields is written to amdahl's stdout and flushed at
//! once (partial lines too, so prompts and progress bars are not held back), before it is
//! scanned. Bytes are never decoded: output that is not UTF-8 passes through untouched and is
//! matched by a byte regex. A line ends at `\n` or `\r` (a progress bar redraws its line with
//! `\r`). The copy runs on its own thread, which always drains the pipe, so the command can
//! never block on a full pipe while amdahl waits for it.

use crate::progress::{unix_now, Units, Work};
use regex::bytes::Regex;
use std::io::{ErrorKind, Read, Write};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// The longest line scanned: longer ones are scanned by their first 64 KiB (they still pass
/// through whole). Bounds the memory a command without newlines can make amdahl hold.
pub const MAX_LINE: usize = 64 * 1024;

/// How many characters of a progress line a warning quotes: enough to recognise the line, not
/// the 64 KiB a line may hold.
pub const QUOTED_CHARS: usize = 80;

/// The first [`QUOTED_CHARS`] characters of `s`, with "…" when there were more (cut at a character,
/// never inside one).
pub fn quoted_head(s: &str) -> String {
    match s.char_indices().nth(QUOTED_CHARS) {
        Some((i, _)) => format!("{}…", s.get(..i).unwrap_or(s)),
        None => s.to_string(),
    }
}

/// Counts the progress lines of a byte stream fed to it in chunks of any size.
///
/// With a capture group in the regex, the first group that took part in the line's last match is
/// the step count (`step (\d+)` on `step 1200/5000` reads 1200): the count is absolute, as a
/// progress file's. Without one, each match is one more step.
pub struct LineCounter {
    regex: Regex,
    absolute: bool,
    line: Vec<u8>,
    /// Lines whose group was not a whole number, and the first of them (for the warning).
    unreadable: u64,
    first_unreadable: Option<String>,
}

impl LineCounter {
    pub fn new(regex: Regex) -> Self {
        let absolute = regex.captures_len() > 1;
        LineCounter {
            regex,
            absolute,
            line: Vec::new(),
            unreadable: 0,
            first_unreadable: None,
        }
    }

    /// Scan `bytes`; complete lines are counted into `units` now, a trailing partial line waits
    /// for its end.
    pub fn feed(&mut self, bytes: &[u8], units: &Units) {
        let mut parts = bytes.split(|&b| b == b'\n' || b == b'\r');
        // `split` yields one more part than there are line ends: the last is unfinished.
        let mut current = parts.next();
        for next in parts {
            if let Some(part) = current {
                self.push(part);
            }
            self.end_line(units);
            current = Some(next);
        }
        if let Some(part) = current {
            self.push(part);
        }
    }

    /// The end of the stream: a last line without a line end counts too.
    pub fn finish(&mut self, units: &Units) {
        self.end_line(units);
    }

    /// Lines whose captured group was not a whole number (ignored), with the first one.
    pub fn unreadable(&self) -> (u64, Option<&str>) {
        (self.unreadable, self.first_unreadable.as_deref())
    }

    fn push(&mut self, part: &[u8]) {
        let room = MAX_LINE.saturating_sub(self.line.len());
        self.line
            .extend_from_slice(part.get(..room.min(part.len())).unwrap_or_default());
    }

    fn end_line(&mut self, units: &Units) {
        if !self.line.is_empty() {
            self.count(units);
        }
        self.line.clear();
    }

    fn count(&mut self, units: &Units) {
        if !self.absolute {
            let n = self.regex.find_iter(&self.line).count() as u64;
            if n > 0 {
                units.add(n);
            }
            return;
        }
        let group = self
            .regex
            .captures_iter(&self.line)
            .filter_map(|c| c.iter().skip(1).flatten().next())
            .last();
        let Some(group) = group else { return };
        let n = std::str::from_utf8(group.as_bytes())
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        match n {
            Some(n) => units.set(n, unix_now()),
            None => {
                self.unreadable += 1;
                if self.first_unreadable.is_none() {
                    self.first_unreadable = Some(quoted_head(&String::from_utf8_lossy(&self.line)));
                }
            }
        }
    }
}

/// How the copy ended.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TeeEnd {
    /// Warnings for the record: lines whose step number could not be read, a failed write.
    pub warnings: Vec<String>,
}

/// The copy of the command's stdout in progress (see the module's documentation).
pub struct Tee {
    done: mpsc::Receiver<TeeEnd>,
}

/// Copy `from` to amdahl's stdout on a new thread, counting the lines that match `regex` as
/// steps of `work`.
pub fn start<R: Read + Send + 'static>(from: R, regex: Regex, work: Arc<Work>) -> Tee {
    start_to(from, std::io::stdout(), regex, work)
}

/// [`start`] into any writer (tests).
pub fn start_to<R, W>(from: R, to: W, regex: Regex, work: Arc<Work>) -> Tee
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let (tx, done) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("amdahl-stdout".into())
        .spawn(move || {
            let end = pump(from, to, LineCounter::new(regex), &work.steps);
            let _ = tx.send(end);
        });
    if let Err(e) = spawned {
        // No thread: nothing reads the pipe. The receiver reports it at the end; the command
        // gets EPIPE when it writes, as with a closed stdout.
        let (tx, rx) = mpsc::channel();
        let _ = tx.send(TeeEnd {
            warnings: vec![format!(
                "could not start the thread that copies the command's stdout ({e}): its output was lost and no step was counted"
            )],
        });
        return Tee { done: rx };
    }
    Tee { done }
}

impl Tee {
    /// Wait until the command's stdout is closed by every process that holds it, for at most
    /// `grace` (call it once the command has exited: then its own output is all in the pipe).
    /// `None` when background processes the command started still hold it open: the copy goes on
    /// until amdahl exits, and the steps they print later are not in the record.
    pub fn finish(self, grace: Duration) -> Option<TeeEnd> {
        self.done.recv_timeout(grace).ok()
    }
}

/// Copy until end of file (or until amdahl's stdout is closed), then count the last line.
fn pump(
    mut from: impl Read,
    mut to: impl Write,
    mut counter: LineCounter,
    units: &Units,
) -> TeeEnd {
    let mut buf = vec![0u8; 64 * 1024];
    let mut end = TeeEnd::default();
    let mut writing = true;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                end.warnings
                    .push(format!("reading the command's stdout failed: {e}"));
                break;
            }
        };
        let chunk = buf.get(..n).unwrap_or_default();
        if writing {
            if let Err(e) = to.write_all(chunk).and_then(|_| to.flush()) {
                if e.kind() == ErrorKind::BrokenPipe {
                    // Whoever read amdahl's stdout has gone (`amdahl run … | head`): close the
                    // pipe so the command gets SIGPIPE/EPIPE on its next write, as it would have
                    // without amdahl in between.
                    counter.feed(chunk, units);
                    counter.finish(units);
                    return end;
                }
                end.warnings.push(format!(
                    "writing the command's output to stdout failed ({e}); the rest of it was read (for the step count) but not written"
                ));
                writing = false;
            }
        }
        counter.feed(chunk, units);
    }
    counter.finish(units);
    if let (n @ 1.., Some(first)) = counter.unreadable() {
        end.warnings.push(format!(
            "--progress-regex: in {n} line(s) the captured group was not a whole number, so they were not counted (first: {first:?}); capture only the digits, e.g. `step (\\d+)`"
        ));
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn counted(re: &str, chunks: &[&[u8]]) -> (u64, LineCounter) {
        let u = Units::new("step");
        let mut c = LineCounter::new(Regex::new(re).unwrap());
        for ch in chunks {
            c.feed(ch, &u);
        }
        c.finish(&u);
        (u.done(), c)
    }

    #[test]
    fn without_a_group_each_match_is_a_step() {
        assert_eq!(counted("^step", &[b"step 1\nloss 2\nstep 2\n"]).0, 2);
        // Two matches on one line are two steps; a line split across reads is one line.
        assert_eq!(counted("ok", &[b"ok ok\nst", b"ep ok", b"\n"]).0, 3);
        // `^` anchors at each line: a line cut by a read is not two lines.
        assert_eq!(counted("^step", &[b"st", b"ep\n"]).0, 1);
    }

    #[test]
    fn a_group_gives_the_absolute_count() {
        assert_eq!(counted(r"step (\d+)", &[b"step 3\nstep 7/100\n"]).0, 7);
        // The last match on a line wins; the optional group that took part is used.
        assert_eq!(counted(r"(?:a(\d+)|b(\d+))", &[b"a1 b9\n"]).0, 9);
        // A last line without a line end still counts.
        assert_eq!(counted(r"(\d+)$", &[b"12\n13"]).0, 13);
    }

    #[test]
    fn carriage_returns_end_lines_as_progress_bars_redraw() {
        assert_eq!(counted(r"^it (\d+)", &[b"it 1\rit 2\rit 3\r\n"]).0, 3);
    }

    #[test]
    fn bytes_that_are_not_utf8_still_match() {
        assert_eq!(counted(r"step (\d+)", &[b"\xff\xfe step 5 \xc3\n"]).0, 5);
    }

    #[test]
    fn a_group_that_is_not_a_number_is_counted_as_unreadable() {
        let (n, c) = counted(r"step (\w+)", &[b"step x\nstep 2\nstep y\n"]);
        assert_eq!(n, 2);
        assert_eq!(c.unreadable(), (2, Some("step x")));
    }

    #[test]
    fn a_huge_line_is_scanned_by_its_head_only() {
        let mut big = b"step 4 ".to_vec();
        big.extend(vec![b'x'; 3 * MAX_LINE]);
        big.extend(b" step 9\n");
        let (n, c) = counted(r"step (\d+)", &[&big]);
        assert_eq!(n, 4, "the tail beyond MAX_LINE is not scanned");
        assert!(c.line.capacity() <= 2 * MAX_LINE);
    }

    /// A writer the test can read afterwards.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_copy_is_byte_identical_and_counts() {
        let input: Vec<u8> = (0..=255u8)
            .chain(
                b"\nstep 1\r\nstep 2\n\x00\x80no newline at the end"
                    .iter()
                    .copied(),
            )
            .collect();
        let out = Shared::default();
        let work = Arc::new(Work::default());
        let tee = start_to(
            std::io::Cursor::new(input.clone()),
            out.clone(),
            Regex::new(r"^step (\d+)$").unwrap(),
            Arc::clone(&work),
        );
        let end = tee.finish(Duration::from_secs(10)).unwrap();
        assert_eq!(end, TeeEnd::default());
        assert_eq!(*out.0.lock().unwrap(), input);
        assert_eq!(work.steps.done(), 2);
    }

    /// Regression: a 64 KiB line whose group was not a number was quoted whole into the warning
    /// (and so into the record). The quote is now its first 80 characters and "…".
    #[test]
    fn a_huge_unreadable_line_is_quoted_by_its_head_only() {
        let mut input = b"step ".to_vec();
        // Two-byte characters, so a cut by bytes would land inside one.
        input.extend("é".repeat(MAX_LINE).as_bytes());
        input.push(b'\n');
        let work = Arc::new(Work::default());
        let tee = start_to(
            std::io::Cursor::new(input),
            Shared::default(),
            Regex::new(r"step (\S+)").unwrap(),
            Arc::clone(&work),
        );
        let end = tee.finish(Duration::from_secs(10)).unwrap();
        let [w] = end.warnings.as_slice() else {
            panic!("{:?}", end.warnings)
        };
        let quoted = format!("{:?}", format!("step {}…", "é".repeat(75)));
        assert!(w.contains(&format!("(first: {quoted})")), "{w}");
        assert!(w.chars().count() < 300, "{} characters", w.chars().count());
    }

    #[test]
    fn a_closed_stdout_stops_the_copy() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let work = Arc::new(Work::default());
        let tee = start_to(
            std::io::Cursor::new(b"step\n".to_vec()),
            Closed,
            Regex::new("step").unwrap(),
            Arc::clone(&work),
        );
        assert!(tee.finish(Duration::from_secs(10)).is_some());
        assert_eq!(work.steps.done(), 1);
    }
}
