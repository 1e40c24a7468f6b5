//! A progress line on stderr for long CLI work (merging many inputs, collapsing a large perf
//! script, pushing many files). It is drawn only when stderr is a terminal, rewritten in place
//! at most ten times a second once the work has run for a quarter of a second (short commands
//! never show it), and erased when the work ends; piped or redirected, nothing is written.
//! `EMBER_PROGRESS_DELAY_MS` changes the quarter of a second (0: from the first step; the
//! tests use it, since how long a step takes depends on the machine).

use std::io::{IsTerminal, Read, Write};
use std::time::{Duration, Instant};

/// Work shorter than this shows no progress at all (unless `EMBER_PROGRESS_DELAY_MS` says
/// otherwise).
const DELAY: Duration = Duration::from_millis(250);

/// [`DELAY`], or `EMBER_PROGRESS_DELAY_MS` when it is set to a number of milliseconds.
fn delay() -> Duration {
    std::env::var("EMBER_PROGRESS_DELAY_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(DELAY, Duration::from_millis)
}
/// The shortest time between two redraws.
const EVERY: Duration = Duration::from_millis(100);

/// What is counted.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// Files (`12 / 300 files`).
    Files,
    /// Bytes read (`12.5 / 300.0 MB`).
    Bytes,
}

/// One progress line.
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    /// How long the work runs before the line is first drawn.
    delay: Duration,
    verb: &'static str,
    unit: Unit,
    total: Option<u64>,
    done: u64,
    started: Instant,
    drawn_at: Option<Instant>,
}

impl Progress {
    /// Progress of `verb` ("merging") over `total` items, drawn if stderr is a terminal.
    pub fn new(verb: &'static str, unit: Unit, total: Option<u64>) -> Progress {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            delay: delay(),
            verb,
            unit,
            total,
            done: 0,
            started: Instant::now(),
            drawn_at: None,
        }
    }

    /// Counts `n` more items done; `current` names what is being worked on.
    pub fn add(&mut self, n: u64, current: &dyn std::fmt::Display) {
        self.done += n;
        if !self.enabled || self.started.elapsed() < self.delay {
            return;
        }
        if self.drawn_at.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        let line = self.line(current);
        let mut err = std::io::stderr().lock();
        // \r and erase-line: the line is redrawn in place, never scrolled.
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.drawn_at = Some(Instant::now());
    }

    /// Erases the line before something else is printed to the terminal; the next
    /// [`add`](Progress::add) draws it again.
    pub fn clear(&mut self) {
        if self.drawn_at.take().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }

    fn amount(&self, n: u64) -> String {
        match self.unit {
            Unit::Files => n.to_string(),
            Unit::Bytes => format!("{:.1}", n as f64 / 1e6),
        }
    }

    fn line(&self, current: &dyn std::fmt::Display) -> String {
        let unit = match self.unit {
            Unit::Files => "files",
            Unit::Bytes => "MB",
        };
        let count = match self.total {
            Some(t) if t > 0 => format!(
                "{} / {} {unit} ({:.0}%)",
                self.amount(self.done),
                self.amount(t),
                self.done as f64 * 100.0 / t as f64
            ),
            _ => format!("{} {unit}", self.amount(self.done)),
        };
        let mut current = current.to_string();
        if current.chars().count() > 50 {
            let tail: String = current
                .chars()
                .rev()
                .take(49)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            current = format!("…{tail}");
        }
        format!(
            "ember: {} {count}, {:.1} s{}{}",
            self.verb,
            self.started.elapsed().as_secs_f64(),
            if current.is_empty() { "" } else { ": " },
            current
        )
    }
}

impl Drop for Progress {
    /// Erases the line, so what the command prints next starts on a clean line.
    fn drop(&mut self) {
        self.clear();
    }
}

/// A reader that counts what passes through it on a [`Progress`] in bytes.
#[derive(Debug)]
pub struct Counting<R> {
    inner: R,
    progress: Progress,
    name: String,
}

impl<R: Read> Counting<R> {
    /// Counts `inner`'s bytes; `total` is its size when known.
    pub fn new(inner: R, verb: &'static str, total: Option<u64>, name: String) -> Counting<R> {
        Counting {
            inner,
            progress: Progress::new(verb, Unit::Bytes, total),
            name,
        }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64, &self.name);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_counts_and_shortens_the_current_name() {
        let mut p = Progress::new("merging", Unit::Files, Some(4));
        p.enabled = false;
        p.add(1, &"a.pb.gz");
        let line = p.line(&"a.pb.gz");
        assert!(
            line.starts_with("ember: merging 1 / 4 files (25%), ") && line.ends_with(": a.pb.gz"),
            "{line}"
        );
        let long = "d/".repeat(40);
        assert_eq!(
            p.line(&long).rsplit(": ").next().unwrap().chars().count(),
            50
        );
        let mut b = Progress::new("collapsing", Unit::Bytes, None);
        b.enabled = false;
        b.add(2_500_000, &"");
        assert!(
            b.line(&"").starts_with("ember: collapsing 2.5 MB, "),
            "{}",
            b.line(&"")
        );
    }
}
