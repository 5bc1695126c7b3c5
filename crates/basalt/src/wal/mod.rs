//! The write-ahead log: every write batch is appended here (as one log
//! record, see `log/`) before it reaches a memtable, so a crash loses no
//! acknowledged write. One WAL is shared by all trees of a database.

pub mod batch;
pub mod format;
