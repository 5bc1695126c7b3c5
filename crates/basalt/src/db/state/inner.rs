//! `DbInner`: the shared state of one open database, as its parts, with
//! the table of which part guards what.

use std::path::PathBuf;
use std::sync::Arc;

use super::clock::CommitClock;
use super::counters::Counters;
use super::feed_index::FeedIndex;
use super::files_in_use::FilesInUse;
use super::index_builds::IndexBuilds;
use super::jobs::Jobs;
use super::lifecycle::Lifecycle;
use super::open_trees::OpenTrees;
use super::row_cache::RowCache;
use super::snapshots::Snapshots;
use super::sst_readers::SstReaders;
use super::versions::{Held, InstallParts, Memtables, Versions};
use super::write_path::WritePath;
use crate::error::{Error, Result};
use crate::io::Fs;
use crate::options::Options;
use crate::version::{Version, VersionEdit};

/// Everything shared between the handle, iterators, snapshots and the
/// background threads.
///
/// Constant after construction: `dir`, `opts`, `fs`, `id`, `read_only`.
/// Every other field is a part that guards its own state; which lock
/// guards what:
///
/// | part | guards | lock(s), taken only in |
/// | --- | --- | --- |
/// | `versions` | the MANIFEST, file numbers, the current version and the super version readers load | `Versions`' set and replace locks, `versions.rs` |
/// | `writer` | the group-commit queue, the exclusive writer right, the WAL, the seqnos | queue and WAL locks, `write_path.rs` |
/// | `jobs` | the first fatal error, stopping, one compaction and one flush at a time, the drain rate | `jobs.rs` |
/// | `files` | files jobs hold from collection, one collection at a time | `files_in_use.rs` |
/// | `snapshots` | the live snapshots' seqnos | `snapshots.rs` |
/// | `clock` | which seqno was committed when | `clock.rs` |
/// | `feed_index` | where the change feed finds seqnos in WAL files | `feed_index.rs` |
/// | `open_trees` | the open table and keyspace handles by tree | `open_trees.rs` |
/// | `indexes` | rows touched during index builds, when each index became ready | `index_builds.rs` |
/// | `lifecycle` | open, closed, released; the directory lock | `lifecycle.rs` |
/// | `sst_readers`, `blob_files`, `row_cache` | open files and cached blocks and rows | internal to each |
/// | `counters` | statistics (atomics) | none |
///
/// The order locks may nest in is their rank (`ranked.rs`, `Rank`, first
/// taken first): debug builds, every test included, panic on a lock taken
/// out of order, naming both. The exclusive writer right (a right the
/// write queue grants, not a held mutex) ranks between `Collecting` and
/// `OpenTrees`.
///
/// Reads take none of these locks: they load the super version and a
/// seqno (`read/point.rs`), and the caches lock internally.
pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub opts: Options,
    /// The file system, guarded: it refuses every change once the
    /// database let its directory go (`lifecycle`).
    pub fs: Arc<dyn Fs>,
    /// Unique among the databases this process opened.
    pub id: u64,
    /// Open, closed, released: every call through a handle that outlived
    /// the `Db` gets `Error::Closed`, and nothing is written after the
    /// directory lock is given up.
    pub lifecycle: Lifecycle,
    /// Opened by `Db::open_read_only`: nothing is written, no thread runs.
    pub read_only: bool,
    /// The catalog and SSTs of every tree, the MANIFEST that logs them,
    /// and what reads see: memtables and the current version.
    pub versions: Versions,
    pub writer: WritePath,
    pub jobs: Jobs,
    pub files: FilesInUse,
    /// Open SST readers and the block cache they read through.
    pub sst_readers: Arc<SstReaders>,
    /// Open blob files, for values kept apart from their keys.
    pub blob_files: Arc<crate::blob::BlobFiles>,
    /// With `Options::row_cache_bytes` above zero.
    pub row_cache: Option<RowCache>,
    pub snapshots: Snapshots,
    /// Commit times, for history windows and reads as of a time.
    pub clock: CommitClock,
    /// Record offsets in WAL files, for the change feed.
    pub feed_index: FeedIndex,
    pub counters: Counters,
    /// Live table and keyspace handles by tree, to refuse dropping a tree
    /// in use.
    pub open_trees: OpenTrees,
    /// Index builds under way and when each index became usable.
    pub indexes: IndexBuilds,
}

impl DbInner {
    /// Whether the `Db` was closed or dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.lifecycle.is_closed()
    }

    /// [`Error::Closed`] once the `Db` was closed or dropped.
    pub(crate) fn check_open(&self) -> Result<()> {
        self.lifecycle.check_open()
    }

    /// Records the first fatal error (writes stop) and returns it.
    pub(crate) fn set_bg_error(&self, e: Error) -> Error {
        self.jobs.fail(e)
    }

    /// What an install works with besides the versions.
    pub(crate) fn install_parts(&self) -> InstallParts<'_> {
        InstallParts {
            read_only: self.read_only,
            lifecycle: &self.lifecycle,
            jobs: &self.jobs,
            files: &self.files,
            writer: &self.writer,
            fs: self.fs.as_ref(),
            dir: &self.dir,
        }
    }

    /// Logs and installs the edit `make` returns (see
    /// [`Versions::install`]).
    pub(crate) fn install(
        &self,
        memtables: Memtables<'_>,
        releasing: &[u64],
        make: impl FnOnce(&mut Held<'_>) -> Result<Option<VersionEdit>>,
    ) -> Result<Option<Arc<Version>>> {
        self.versions.install(&self.install_parts(), memtables, releasing, make)
    }

    /// Logs and installs `edit`, the memtables kept.
    pub(crate) fn install_edit(&self, edit: VersionEdit) -> Result<()> {
        self.install(Memtables::Keep, &[], |_| Ok(Some(edit))).map(drop)
    }
}
