//! The one error type of the engine. Bad input and damaged files become one of
//! these variants; the engine never panics on them.

use std::path::PathBuf;

/// Result alias used across the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Basalt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused an I/O operation.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory the operation was on (empty when unknown).
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Bytes on disk are not what Basalt wrote: a checksum mismatch, a bad
    /// length or an impossible value.
    #[error("corruption in {file} at offset {offset}: {what}")]
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset of the damaged record, block or field.
        offset: u64,
        /// What was found to be wrong.
        what: String,
    },
    /// The caller passed something Basalt cannot accept; nothing was changed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A record batch does not match the table's schema.
    #[error("schema mismatch: {0}")]
    SchemaMismatch(String),
    /// Another handle, in this process or another, holds the database directory.
    #[error("database at {0} is locked by another handle")]
    Locked(PathBuf),
    /// The database was closed, or stopped accepting writes after an I/O
    /// error it could not recover from.
    #[error("database is closed: {0}")]
    Closed(String),
    /// A write, DDL, flush, compaction or checkpoint through a database
    /// opened with [`Db::open_read_only`](crate::Db::open_read_only);
    /// nothing was changed.
    #[error("read-only: {0}")]
    ReadOnly(String),
    /// The operation cannot run now (for example a table in use); retry later.
    #[error("busy: {0}")]
    Busy(String),
    /// A transaction's commit lost to another: a key it wrote or read for
    /// update was written by a commit after its snapshot. Nothing of the
    /// transaction was written; run it again.
    #[error("transaction conflict: {0}")]
    Conflict(String),
    /// A write (or a unique index's creation) would give two rows the
    /// same value in a unique index; nothing was changed.
    #[error("unique index {index} already holds {value}")]
    UniqueViolation {
        /// The index.
        index: String,
        /// The indexed values, as text.
        value: String,
    },
    /// A read of a past point (a snapshot as of a time or a seqno, a key's
    /// history, a change feed) that the tree's history window no longer
    /// covers, or that it never kept; nothing was read.
    #[error("history unavailable: {what}")]
    HistoryUnavailable {
        /// What was asked and why it cannot be answered.
        what: String,
        /// The oldest seqno a read of that tree may still ask for, if any.
        oldest_seqno: Option<u64>,
    },
    /// The engine broke one of its own invariants: a bug in Basalt, never
    /// the caller's input. Debug builds panic where it is made; release
    /// builds report it and change nothing more. Please report it.
    #[error("internal error (a bug in Basalt): {0}")]
    Internal(String),
}

impl Error {
    /// Builds an [`Error::Io`] naming the path the operation was on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        Error::Corruption { file: file.into(), offset, what: what.into() }
    }

    /// What went wrong, without the location: the `what` of a corruption
    /// found by a decoder that does not know its file (Arrow IPC, row
    /// bytes, keys), for the caller to report under the file and offset
    /// it read the bytes from.
    pub(crate) fn reason(&self) -> String {
        match self {
            Error::Corruption { what, .. } => what.clone(),
            other => other.to_string(),
        }
    }

    /// An [`Error::Internal`]: a path only a bug in the engine reaches.
    /// Debug builds, every test included, stop there.
    #[track_caller]
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        let what = what.into();
        debug_assert!(false, "internal error: {what}");
        Error::Internal(what)
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A copy of this error for reporting to several waiters (I/O errors are
    /// not `Clone`, so their kind and message are kept).
    #[must_use]
    pub fn duplicate(&self) -> Self {
        match self {
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption { file, offset, what } => {
                Error::Corruption { file: file.clone(), offset: *offset, what: what.clone() }
            }
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::SchemaMismatch(s) => Error::SchemaMismatch(s.clone()),
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::Closed(s) => Error::Closed(s.clone()),
            Error::Busy(s) => Error::Busy(s.clone()),
            Error::ReadOnly(s) => Error::ReadOnly(s.clone()),
            Error::Conflict(s) => Error::Conflict(s.clone()),
            Error::Internal(s) => Error::Internal(s.clone()),
            Error::HistoryUnavailable { what, oldest_seqno } => {
                Error::HistoryUnavailable { what: what.clone(), oldest_seqno: *oldest_seqno }
            }
            Error::UniqueViolation { index, value } => {
                Error::UniqueViolation { index: index.clone(), value: value.clone() }
            }
        }
    }
}

/// An error of an Arrow source a caller hands the engine (a
/// `RecordBatchReader` given to `Table::bulk_load_from`): bad input.
impl From<arrow_schema::ArrowError> for Error {
    fn from(e: arrow_schema::ArrowError) -> Error {
        Error::InvalidArgument(format!("reading the input: {e}"))
    }
}
