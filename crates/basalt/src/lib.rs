//! Basalt: an embedded, crash-safe storage engine whose tables take and give
//! Apache Arrow record batches. This crate root only re-exports the public
//! API; the folders are the architecture (see `docs/architecture.md`).

pub mod cache;
pub mod codec;
pub mod compaction;
mod db;
mod error;
mod files;
pub mod io;
pub mod log;
pub mod memtable;
mod options;
pub mod row_cache;
pub mod sst;
mod striped;
pub mod table;
pub mod version;
pub mod wal;

pub use codec::key::KeyValue;
pub use db::{
    Db, DbIterator, Direction, GetLatency, LevelStats, ScanOptions, Snapshot, Stats, Table, TableOptions,
    TableScan,
};
pub use error::{Error, Result};
pub use options::{Compression, Options, ReadOptions, WriteOptions};
pub use table::filter::{CmpOp, Filter, Predicate};
pub use wal::batch::WriteBatch;
