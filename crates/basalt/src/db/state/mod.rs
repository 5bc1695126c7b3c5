//! The ground floor of the database: `DbInner` (`inner.rs`), everything
//! the handle, iterators, snapshots and background threads share, as
//! parts that each own their state and locks, and the data every handle
//! of a tree holds (`handles.rs`). Every room above (`read`, `write`,
//! `jobs`, `index`, `handles`) works through these parts' operations;
//! none takes a part's lock itself.

pub(crate) mod clock;
pub(crate) mod counters;
pub(crate) mod feed_index;
pub(crate) mod files_in_use;
pub(crate) mod handles;
pub(crate) mod index_builds;
pub(crate) mod inner;
pub(crate) mod jobs;
pub(crate) mod lifecycle;
pub(crate) mod open_trees;
pub(crate) mod row_cache;
pub(crate) mod snapshots;
pub(crate) mod sst_readers;
pub(crate) mod versions;
pub(crate) mod write_path;
