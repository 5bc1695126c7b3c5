//! Leveled compaction. The policy ([`picker::choose`]) is a pure function of
//! a version and the options, so tests and simulators run it without I/O;
//! [`retain`] decides which versions of a key survive; [`merge`] merges SST
//! cursors in internal-key order. The database's compaction thread does the
//! I/O (`db/compact.rs`).

pub mod merge;
pub mod picker;
pub mod retain;

pub use picker::{CompactionTask, choose};
