//! Record logs: the framing shared by the WAL and the MANIFEST. A log is a
//! sequence of checksummed records appended to a file; see `format.rs`.

pub mod format;
pub mod reader;
pub mod writer;
