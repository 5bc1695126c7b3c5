//! Basalt: an embedded, crash-safe storage engine whose tables take and give
//! Apache Arrow record batches. This crate root only re-exports the public
//! API; the folders are the architecture (see `docs/architecture.md`).

pub mod cache;
pub mod codec;
mod error;
pub mod io;
mod options;
pub mod sst;
mod files;
pub mod log;
pub mod memtable;
pub mod version;
pub mod wal;
mod db;

pub use error::{Error, Result};
pub use options::{Compression, Options, ReadOptions, WriteOptions};
pub use db::{Db, DbIterator, Direction, LevelStats, Snapshot, Stats};
pub use wal::batch::WriteBatch;
