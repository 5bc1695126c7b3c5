//! The expected-state log: one file per writer thread, a line per event.
//!
//! ```text
//! P <id>   the writer is about to submit batch <id>      (written + fsynced before)
//! A <id>   batch <id> was acknowledged                     (written + fsynced after)
//! X <id>   the driver found pending batch <id> absent after a kill;
//!          the writer submits the same batch again
//! ```
//!
//! Batch ids of a thread go 0, 1, 2, … with no gaps; a batch's contents
//! follow from its id, so the log need not hold them. A kill can leave one
//! pending batch (a `P` with no `A` or `X` after it): it may or may not be
//! in the database, and the driver records which. A last line without its
//! newline was cut by the kill and is ignored.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a log says about its thread's batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogState {
    /// Batches `0..acked` were acknowledged (or found present after a kill).
    pub acked: u64,
    /// A batch submitted and neither acknowledged nor resolved: `acked`.
    pub pending: Option<u64>,
}

/// Parses a log; an error describes a log no correct writer produces.
pub fn parse(text: &str) -> Result<LogState, String> {
    let mut state = LogState { acked: 0, pending: None };
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    for (i, line) in complete.lines().enumerate() {
        let bad = || format!("line {}: unexpected {line:?} after {state:?}", i + 1);
        let (tag, id) = line.split_once(' ').ok_or_else(bad)?;
        let id: u64 = id.parse().map_err(|_| bad())?;
        match (tag, state.pending) {
            ("P", None) if id == state.acked => state.pending = Some(id),
            ("A", Some(p)) if p == id => state = LogState { acked: id + 1, pending: None },
            ("X", Some(p)) if p == id => state.pending = None,
            _ => return Err(bad()),
        }
    }
    Ok(state)
}

/// Reads and parses the log at `path`; a missing log is an empty one.
pub fn read(path: &Path) -> Result<LogState, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LogState { acked: 0, pending: None }),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The log of one writer thread, open for appending.
pub struct ExpectedLog {
    path: PathBuf,
    file: File,
}

impl ExpectedLog {
    /// Opens (creating if missing) the log at `path`.
    pub fn open(path: &Path) -> std::io::Result<ExpectedLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(ExpectedLog { path: path.to_path_buf(), file })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line in one `write` and fsyncs it.
    pub fn record(&mut self, tag: char, id: u64) -> std::io::Result<()> {
        self.file.write_all(format!("{tag} {id}\n").as_bytes())?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_parse_to_acked_and_pending() {
        let s = |acked, pending| Ok(LogState { acked, pending });
        assert_eq!(parse(""), s(0, None));
        assert_eq!(parse("P 0\n"), s(0, Some(0)));
        assert_eq!(parse("P 0\nA 0\nP 1\nA 1\n"), s(2, None));
        assert_eq!(parse("P 0\nA 0\nP 1\nX 1\nP 1\n"), s(1, Some(1)));
        assert_eq!(parse("P 0\nA 0\nP 1\nA"), s(1, Some(1)), "a cut last line is ignored");
    }

    #[test]
    fn impossible_logs_are_refused() {
        for bad in ["A 0\n", "P 1\n", "P 0\nP 0\n", "P 0\nA 1\n", "P 0\nA 0\nX 0\n", "Q 0\n", "P x\n"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
