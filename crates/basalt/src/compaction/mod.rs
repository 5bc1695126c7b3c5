//! Leveled compaction. The policy ([`picker::choose`]) is a pure function of
//! a version and the options, so tests and simulators run it without I/O;
//! [`retain`] decides which versions of a key survive. The database's
//! compaction thread does the I/O (`db/compact.rs`), merging the inputs
//! through the tree cursor that reads use (`db/cursor.rs`).

pub mod covered;
pub mod fold;
pub mod picker;
pub mod retain;

pub use picker::{CompactionTask, choose};
