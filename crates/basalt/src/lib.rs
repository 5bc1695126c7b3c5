//! Basalt: an embedded, crash-safe storage engine whose tables take and give
//! Apache Arrow record batches. This crate root only re-exports the public
//! API; the folders are the architecture (see `docs/architecture.md`).
//!
//! The API is [`Db`] and its handles ([`Table`], [`Snapshot`], iterators and
//! scans), [`WriteBatch`], the option structs and [`Error`]. Two features add
//! modules for tools rather than applications: `testing` (an in-memory file
//! system that simulates crashes, fault injection) and `inspect` (dumping
//! and checking the on-disk formats).
//!
//! `Db`'s and `Table`'s pages have examples that run (doc tests); the
//! README and `docs/` explain the design.

// Every public item says what it is: the crate is depended on.
#![warn(missing_docs)]

mod blob;
mod catalog;
mod codec;
mod compaction;
mod compaction_filter;
pub mod conform;
mod db;
mod error;
mod files;
mod ids;
mod io;
mod log;
mod memtable;
mod merge;
mod options;
mod range_del;
mod ranked;
mod row;
mod shards;
mod sst;
mod striped;
mod version;
mod wal;

#[cfg(feature = "inspect")]
pub mod inspect;
#[cfg(feature = "testing")]
pub mod testing;

/// The file-system seam: every byte the engine reads or writes goes
/// through an [`Fs`](fs::Fs) (`Options::fs`), the real one by default.
pub mod fs {
    pub use crate::io::{FileLock, Fs, RandomAccessFile, RealFs, WritableFile};
}

/// The clock seam: commit times come from a [`WallClock`](clock::WallClock)
/// (`Options::clock`), the system's by default; tests move a
/// [`ManualClock`](clock::ManualClock) to a time to live's boundaries.
pub mod clock {
    pub use crate::io::{ManualClock, SystemClock, WallClock};
}

/// The crates whose types the API shows, re-exported so that a user's
/// versions always match the engine's.
pub use {arrow_array, arrow_schema, bytes};

pub use bytes::Bytes;
pub use catalog::HistoryWindow;
pub use codec::key::{KeyValue, OwnedKeyValue};
pub use compaction_filter::{CompactionFilter, FilterDecision, FilterEntry};
pub use db::{
    AsOf, BulkLoad, CHANGE_OP, CHANGE_RANGE_END, CHANGE_RANGE_START, Change, ColumnEstimate, Db, DbIterator,
    Direction, ExternalSst, GetLatency, HISTORY_COMMIT_TIME, HISTORY_DELETED, HISTORY_SEQNO, HistoryInfo,
    HistoryOptions, IndexInfo, IndexOptions, IndexPredicate, KeyValueRange, KeyVersion, Keyspace, LevelStats,
    LookupOptions, OwnedKeyValueRange, ReadOptions, Row, RowRef, ScanOptions, ScanPlan, Snapshot, Stats,
    Table, TableBytes, TableEstimate, TableOptions, TableOverlay, TableScan, Transaction, TreeBytes,
};
pub use error::{Error, Result};
pub use merge::{MergeError, MergeOperator};
pub use options::{Compression, Options, WriteOptions, default_block_cache_bytes};
pub use row::cell::Cell;
pub use row::evolve::ColumnChange;
pub use row::filter::{CmpOp, Filter, Predicate};
pub use row::layout::COLUMNS_MAX as TABLE_COLUMNS_MAX;
pub use shards::{
    NewStore, SHARD_MAP_FILE, Shard, ShardMap, ShardedStore, StorePin, StoreWrite, split_points_from_sample,
};
pub use wal::batch::WriteBatch;
