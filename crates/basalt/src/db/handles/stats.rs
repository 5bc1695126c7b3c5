//! Statistics: the engine's counters (`counters.rs`) and the shape of the
//! tree, returned by `Db::stats()` with a readable `Display`; and the
//! bytes a table and each of its indexes take on disk
//! (`Table::bytes_on_disk`).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::db::state::counters::{
    READ_BLOCK_NS, READ_BY_FENCES, READ_BY_MODEL, READ_FILTER_NS, READ_FILTERED, READ_GETS,
    READ_INDEX_ENTRIES, READ_INDEX_NS, READ_MEMTABLE_NS, READ_SEARCH_NS, READ_SST_PROBES, READ_TABLE_ROWS,
    READ_TIMED_GETS, READ_WINDOW_SUM,
};
use crate::db::state::handles::Table;
use crate::db::state::inner::DbInner;
use crate::error::{Error, Result};
use crate::ids::{DEFAULT_TREE, TreeId};
use crate::version::{LEVELS, TreeVersion, Version};

/// Files and bytes in one level of the key-value tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Number of SSTs.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
}

/// Bytes one tree of a table (its rows, or one index) takes on disk, as
/// the current version's SSTs record them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TreeBytes {
    /// The sizes of its SSTs.
    pub sst_bytes: u64,
    /// Value bytes its SSTs point to in blob files (values of at least
    /// `Options::blob_value_bytes_min`); shadowed versions count until a
    /// compaction drops them.
    pub blob_bytes: u64,
}

impl TreeBytes {
    /// SST and blob bytes together.
    pub fn total(&self) -> u64 {
        self.sst_bytes + self.blob_bytes
    }
}

/// What [`Table::bytes_on_disk`] tells: the table's rows and each index,
/// apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableBytes {
    /// The table's own tree: its rows.
    pub rows: TreeBytes,
    /// Each ready index by name, in creation order (as
    /// [`Table::indexes`] lists them).
    pub indexes: Vec<(String, TreeBytes)>,
}

impl TableBytes {
    /// The rows' and every index's bytes together.
    pub fn total(&self) -> u64 {
        self.rows.total() + self.indexes.iter().map(|(_, b)| b.total()).sum::<u64>()
    }
}

/// The bytes of tree `id` in `version` (none for a tree with no files).
fn tree_bytes(version: &Version, id: TreeId) -> TreeBytes {
    let mut bytes = TreeBytes::default();
    for (_, file) in version.tree(id).into_iter().flat_map(TreeVersion::all_files) {
        bytes.sst_bytes += file.size;
        bytes.blob_bytes += file.blob_refs.iter().map(|&(_, value_bytes)| value_bytes).sum::<u64>();
    }
    bytes
}

impl Table {
    /// [`Table::bytes_on_disk`]'s work: one load of the current version,
    /// so the rows' and the indexes' figures are of the same moment.
    pub(crate) fn tree_bytes_on_disk(&self) -> Result<TableBytes> {
        self.inner().check_open()?;
        let sv = self.inner().versions.load_full();
        let version = &sv.version;
        if version.tree(self.tree()).is_none() {
            return Err(Error::InvalidArgument(format!("table {} was dropped", self.name())));
        }
        let indexes = version
            .catalog
            .indexes_of(self.tree())
            .filter(|(_, _, def)| !def.building)
            .map(|(id, tree, _)| (tree.name.clone(), tree_bytes(version, id)))
            .collect();
        Ok(TableBytes { rows: tree_bytes(version, self.tree()), indexes })
    }
}

/// Mean nanoseconds per `get` in each phase of the lookup.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct GetLatency {
    /// Lookups measured.
    pub gets: u64,
    /// Searching the memtables.
    pub memtable_ns: f64,
    /// Bloom filters.
    pub filter_ns: f64,
    /// Locating the block: learned model or fence keys.
    pub index_ns: f64,
    /// Fetching blocks (cache hit or read and check).
    pub block_ns: f64,
    /// Searching the block and copying the value.
    pub search_ns: f64,
}

/// A snapshot of the engine's statistics.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Last seqno visible to reads.
    pub last_seqno: u64,
    /// Write batches committed.
    pub batches_written: u64,
    /// Group commits (WAL appends); batches / groups is the group size.
    pub write_groups: u64,
    /// Bytes appended to WALs.
    pub wal_bytes_written: u64,
    /// WAL fsyncs.
    pub wal_syncs: u64,
    /// Point lookups served.
    pub gets: u64,
    /// SSTs searched by point lookups (after the key-range check; the bloom
    /// filter is consulted inside); divided by `gets`, files probed per get.
    pub sst_probes: u64,
    /// Bytes in the active memtable.
    pub memtable_bytes: usize,
    /// Bytes in all memtables, active and immutable: what the write-buffer
    /// budget (`write_buffer_bytes_max`) bounds.
    pub memtable_bytes_total: usize,
    /// Immutable memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Flushes completed, bytes they wrote and time they took.
    pub flushes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Total flush time.
    pub flush_time: Duration,
    /// Times a writer waited for a flush, total and longest wait.
    pub write_stalls: u64,
    /// Total time writers waited.
    pub write_stall_time: Duration,
    /// Longest single wait.
    pub write_stall_time_max: Duration,
    /// SST probes the bloom filter answered ("not here").
    pub lookups_filtered: u64,
    /// SST probes the learned index answered.
    pub lookups_by_model: u64,
    /// SST probes the fence keys answered (no model, or a key whose
    /// versions ran past the model's window).
    pub lookups_by_fences: u64,
    /// Average entries in the model's search window.
    pub model_window_avg: f64,
    /// Bytes of learned models per entry, over the SSTs open now.
    pub model_bytes_per_key: f64,
    /// Data blocks of the memory-mapped SSTs open now that no read has
    /// checked yet (the flush and compaction threads check the files they
    /// write; files found at open are checked by their first lookups).
    pub blocks_unchecked: u64,
    /// Mean time of a point lookup by phase, when `Options::timing_stats`
    /// is on (all zero otherwise).
    pub get_latency: GetLatency,
    /// Write groups given a delay in the soft zone (or for L0 files).
    pub delayed_groups: u64,
    /// Time writers slept for those delays (short delays add up and are
    /// slept together once they reach a millisecond).
    pub write_delay_time: Duration,
    /// Most memtable memory (active + immutable) seen after an insert.
    pub memtable_bytes_peak: u64,
    /// Memtable switches writers made for room in the write buffer (with a
    /// new WAL, or on the same one while it is short:
    /// `Options::memtable_bytes_max`).
    pub memtable_switches: u64,
    /// Time writers spent on those switches (a new WAL's creation and the
    /// old one's fsync).
    pub memtable_switch_time: Duration,
    /// Compactions run, of which trivial moves (a MANIFEST edit only).
    pub compactions: u64,
    /// Compactions that only moved a file down.
    pub trivial_moves: u64,
    /// SSTs dropped whole because a range delete covered them (never read).
    pub files_dropped_by_range_deletes: u64,
    /// SSTs dropped whole because every entry expired (a time to live;
    /// never read).
    pub files_dropped_expired: u64,
    /// Entries compaction filters removed, and changed.
    pub entries_removed_by_filters: u64,
    /// Entries compaction filters changed the value of.
    pub entries_changed_by_filters: u64,
    /// Bytes read and written by compactions.
    pub compaction_read_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_written_bytes: u64,
    /// Total compaction time.
    pub compaction_time: Duration,
    /// Bytes of write batches ingested (the WAL payload).
    pub ingest_bytes: u64,
    /// Files and bytes per level of the key-value tree.
    pub levels: Vec<LevelStats>,
    /// Block cache hits and misses, usage and capacity in bytes.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Bytes held by the block cache.
    pub block_cache_bytes: u64,
    /// Byte budget of the block cache.
    pub block_cache_capacity_bytes: u64,
    /// Row cache hits (0 without a row cache).
    pub row_cache_hits: u64,
    /// Row cache misses.
    pub row_cache_misses: u64,
    /// Bytes held by the row cache.
    pub row_cache_bytes: u64,
    /// SST readers open.
    pub open_sst_readers: usize,
    /// Memory the open SST readers hold besides cached blocks: fence
    /// indexes, bloom filters, learned models, zone maps (on the heap, or
    /// in the page cache where a file is mapped and its metadata is read
    /// in place).
    pub sst_metadata_bytes: u64,
    /// Live snapshots.
    pub snapshots: usize,
    /// Secondary-index entries read by lookups, counts and scans that
    /// took an index.
    pub index_entries_read: u64,
    /// Table rows read: by scans (every row of the blocks they decode,
    /// before their filter; not the rows of blocks a zone map skipped) and
    /// fetched by index lookups and index-planned scans.
    pub table_rows_read: u64,
    /// Blob files of the current version (values of at least
    /// `Options::blob_value_bytes_min` kept apart from their keys).
    pub blob_files: usize,
    /// Their bytes on disk.
    pub blob_file_bytes: u64,
    /// The value bytes SSTs point to in them (an upper bound of the live
    /// values: shadowed versions count until a compaction drops them).
    /// `blob_file_bytes` minus this is garbage waiting for collection.
    pub blob_live_bytes: u64,
    /// Tables and keyspaces keeping history (`docs/history.md`).
    pub history_trees: usize,
    /// Commit-time marks held (one per millisecond that had commits,
    /// within the longest history window).
    pub commit_time_marks: usize,
    /// The oldest commit time on record.
    pub oldest_commit_time: Option<std::time::SystemTime>,
    /// Range tombstones live in memtables and the version, every tree's:
    /// each stays until compaction has dropped every entry it covers
    /// (`docs/range-deletes.md`); reads over a range one covers check
    /// each key against it.
    pub range_tombstones: usize,
}

impl DbInner {
    pub(crate) fn stats(&self) -> Stats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let sv = self.versions.load_full();
        let memtables = self.versions.memtable_bytes();
        let levels = sv.version.tree(DEFAULT_TREE).map_or_else(
            || vec![LevelStats::default(); LEVELS],
            |t| {
                t.levels
                    .iter()
                    .map(|files| LevelStats { files: files.len(), bytes: files.iter().map(|f| f.size).sum() })
                    .collect()
            },
        );
        let (commit_time_marks, oldest_ms) = self.clock.span();
        let in_memtables: usize =
            std::iter::once(&sv.mem).chain(&sv.imms).map(|m| m.all_range_tombstones().len()).sum();
        let in_version: usize =
            sv.version.trees.values().map(|t| t.range_tombstones.tombstones().len()).sum();
        Stats {
            range_tombstones: in_memtables + in_version,
            history_trees: sv.version.catalog.history_trees(),
            commit_time_marks,
            oldest_commit_time: oldest_ms.map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms)),
            last_seqno: self.writer.visible_seqno(),
            batches_written: get(&c.batches),
            write_groups: get(&c.groups),
            wal_bytes_written: get(&c.wal_bytes),
            wal_syncs: get(&c.wal_syncs),
            gets: c.reads.sum(READ_GETS),
            sst_probes: c.reads.sum(READ_SST_PROBES),
            index_entries_read: c.reads.sum(READ_INDEX_ENTRIES),
            table_rows_read: c.reads.sum(READ_TABLE_ROWS),
            get_latency: {
                let n = c.reads.sum(READ_TIMED_GETS);
                let mean = |i: usize| if n == 0 { 0.0 } else { c.reads.sum(i) as f64 / n as f64 };
                GetLatency {
                    gets: n,
                    memtable_ns: mean(READ_MEMTABLE_NS),
                    filter_ns: mean(READ_FILTER_NS),
                    index_ns: mean(READ_INDEX_NS),
                    block_ns: mean(READ_BLOCK_NS),
                    search_ns: mean(READ_SEARCH_NS),
                }
            },
            lookups_filtered: c.reads.sum(READ_FILTERED),
            lookups_by_model: c.reads.sum(READ_BY_MODEL),
            lookups_by_fences: c.reads.sum(READ_BY_FENCES),
            model_window_avg: {
                let n = c.reads.sum(READ_BY_MODEL);
                if n == 0 { 0.0 } else { c.reads.sum(READ_WINDOW_SUM) as f64 / n as f64 }
            },
            model_bytes_per_key: self.sst_readers.model_bytes_per_key(),
            blocks_unchecked: self.sst_readers.blocks_unchecked(),
            delayed_groups: get(&c.delayed_groups),
            write_delay_time: Duration::from_micros(get(&c.delay_micros)),
            memtable_bytes_peak: get(&c.memtable_bytes_peak),
            memtable_switches: get(&c.switches),
            memtable_switch_time: Duration::from_micros(get(&c.switch_micros)),
            compactions: get(&c.compactions),
            trivial_moves: get(&c.trivial_moves),
            files_dropped_by_range_deletes: get(&c.files_dropped_by_range),
            files_dropped_expired: get(&c.files_dropped_expired),
            entries_removed_by_filters: get(&c.filter_removed),
            entries_changed_by_filters: get(&c.filter_changed),
            compaction_read_bytes: get(&c.compaction_read_bytes),
            compaction_written_bytes: get(&c.compaction_written_bytes),
            compaction_time: Duration::from_micros(get(&c.compaction_micros)),
            ingest_bytes: get(&c.ingest_bytes),
            memtable_bytes: memtables.active,
            memtable_bytes_total: memtables.total,
            immutable_memtables: memtables.immutables,
            flushes: get(&c.flushes),
            flush_bytes: get(&c.flush_bytes),
            flush_time: Duration::from_micros(get(&c.flush_micros)),
            write_stalls: get(&c.stalls),
            write_stall_time: Duration::from_micros(get(&c.stall_micros)),
            write_stall_time_max: Duration::from_micros(get(&c.stall_micros_max)),
            levels,
            block_cache_hits: self.sst_readers.block_cache().hits(),
            block_cache_misses: self.sst_readers.block_cache().misses(),
            block_cache_bytes: self.sst_readers.block_cache().usage_bytes(),
            block_cache_capacity_bytes: self.sst_readers.block_cache().capacity_bytes(),
            row_cache_hits: self.row_cache.as_ref().map_or(0, crate::db::state::row_cache::RowCache::hits),
            row_cache_misses: self
                .row_cache
                .as_ref()
                .map_or(0, crate::db::state::row_cache::RowCache::misses),
            row_cache_bytes: self
                .row_cache
                .as_ref()
                .map_or(0, crate::db::state::row_cache::RowCache::usage_bytes),
            open_sst_readers: self.sst_readers.len(),
            sst_metadata_bytes: self.sst_readers.metadata_bytes(),
            snapshots: self.snapshots.handles(),
            blob_files: sv.version.blobs.len(),
            blob_file_bytes: sv.version.blobs.values().map(|b| b.size).sum(),
            blob_live_bytes: sv.version.blob_references().map(|(_, bytes)| bytes).sum(),
        }
    }
}

impl Stats {
    /// Memory the engine itself holds, each part bounded by an option:
    /// memtables (`write_buffer_bytes_max`), the block cache
    /// (`block_cache_bytes`), the row cache (`row_cache_bytes`) and the open
    /// SSTs' metadata (`sst_metadata_bytes`: grows with the data, as a
    /// B-tree's inner pages do). Pages of mapped SSTs a read touched are
    /// the page cache's, not counted here (the process's RSS shows them).
    pub fn engine_memory_bytes(&self) -> u64 {
        self.memtable_bytes_total as u64
            + self.block_cache_bytes
            + self.row_cache_bytes
            + self.sst_metadata_bytes
    }

    fn fmt_memory(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "engine memory {:.1} MiB: memtables {:.1}, block cache {:.1}, row cache {:.1}, SST metadata {:.1}",
            mib(self.engine_memory_bytes()),
            mib(self.memtable_bytes_total as u64),
            mib(self.block_cache_bytes),
            mib(self.row_cache_bytes),
            mib(self.sst_metadata_bytes)
        )
    }

    /// Bytes written to SSTs (flushes and compactions) per byte ingested;
    /// the WAL adds one more.
    pub fn write_amplification(&self) -> f64 {
        if self.ingest_bytes == 0 {
            return 0.0;
        }
        (self.flush_bytes + self.compaction_written_bytes) as f64 / self.ingest_bytes as f64
    }

    /// SSTs searched per point lookup.
    pub fn files_probed_per_get(&self) -> f64 {
        if self.gets == 0 { 0.0 } else { self.sst_probes as f64 / self.gets as f64 }
    }

    /// Total SST bytes over the bytes of the deepest non-empty level (1.0
    /// when all data is in one level; ~1.11 for a settled ratio-10 tree).
    pub fn space_amplification(&self) -> f64 {
        let total: u64 = self.levels.iter().map(|l| l.bytes).sum();
        let last = self.levels.iter().rev().find(|l| l.bytes > 0).map_or(0, |l| l.bytes);
        if last == 0 { 0.0 } else { total as f64 / last as f64 }
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

impl Stats {
    /// The lines on what was dropped without a delete per key: range
    /// deletes, expiry, compaction filters (each only when it happened).
    fn fmt_dropped(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.range_tombstones > 0 || self.files_dropped_by_range_deletes > 0 {
            writeln!(
                f,
                "range deletes: {} tombstones live, {} files dropped whole",
                self.range_tombstones, self.files_dropped_by_range_deletes
            )?;
        }
        if self.files_dropped_expired > 0 {
            writeln!(f, "time to live: {} files dropped whole, expired", self.files_dropped_expired)?;
        }
        if self.entries_removed_by_filters + self.entries_changed_by_filters > 0 {
            writeln!(
                f,
                "compaction filters: {} entries removed, {} changed",
                self.entries_removed_by_filters, self.entries_changed_by_filters
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group =
            if self.write_groups == 0 { 0.0 } else { self.batches_written as f64 / self.write_groups as f64 };
        writeln!(
            f,
            "seqno {}  batches {}  groups {} ({group:.2} batches/group)",
            self.last_seqno, self.batches_written, self.write_groups
        )?;
        writeln!(f, "wal {:.1} MiB written, {} syncs", mib(self.wal_bytes_written), self.wal_syncs)?;
        writeln!(
            f,
            "memtable {:.1} MiB active, {} immutable; flushes {} ({:.1} MiB, {:.2?})",
            mib(self.memtable_bytes as u64),
            self.immutable_memtables,
            self.flushes,
            mib(self.flush_bytes),
            self.flush_time
        )?;
        writeln!(
            f,
            "stalls {} (total {:.2?}, longest {:.2?}); delayed groups {} ({:.2?}); peak memtables {:.1} MiB",
            self.write_stalls,
            self.write_stall_time,
            self.write_stall_time_max,
            self.delayed_groups,
            self.write_delay_time,
            mib(self.memtable_bytes_peak)
        )?;
        writeln!(
            f,
            "compactions {} ({} trivial moves; {:.1} MiB read, {:.1} MiB written, {:.2?})",
            self.compactions,
            self.trivial_moves,
            mib(self.compaction_read_bytes),
            mib(self.compaction_written_bytes),
            self.compaction_time
        )?;
        writeln!(
            f,
            "write amplification {:.2} (+1 WAL); space amplification {:.2}; files probed per get {:.2}",
            self.write_amplification(),
            self.space_amplification(),
            self.files_probed_per_get()
        )?;
        let lookups = self.block_cache_hits + self.block_cache_misses;
        let hit_rate = if lookups == 0 { 0.0 } else { 100.0 * self.block_cache_hits as f64 / lookups as f64 };
        writeln!(
            f,
            "block cache {:.1}/{:.1} MiB, {} hits, {} misses ({hit_rate:.1}% hits); {} gets; {} snapshots",
            mib(self.block_cache_bytes),
            mib(self.block_cache_capacity_bytes),
            self.block_cache_hits,
            self.block_cache_misses,
            self.gets,
            self.snapshots
        )?;
        self.fmt_memory(f)?;
        writeln!(
            f,
            "tables: {} rows read, {} index entries read",
            self.table_rows_read, self.index_entries_read
        )?;
        if self.row_cache_hits + self.row_cache_misses > 0 {
            writeln!(
                f,
                "row cache {:.1} MiB, {} hits, {} misses",
                mib(self.row_cache_bytes),
                self.row_cache_hits,
                self.row_cache_misses
            )?;
        }
        writeln!(
            f,
            "SST probes: {} filtered, {} by learned index (window {:.1} entries), {} by fences; model {:.2} B/key; \
             {} mapped blocks unchecked",
            self.lookups_filtered,
            self.lookups_by_model,
            self.model_window_avg,
            self.lookups_by_fences,
            self.model_bytes_per_key,
            self.blocks_unchecked
        )?;
        self.fmt_dropped(f)?;
        let g = &self.get_latency;
        if g.gets > 0 {
            writeln!(
                f,
                "get latency (mean of {} timed): memtable {:.0} ns, filter {:.0} ns, index {:.0} ns, block {:.0} ns, search+copy {:.0} ns",
                g.gets, g.memtable_ns, g.filter_ns, g.index_ns, g.block_ns, g.search_ns
            )?;
        }
        for (i, l) in self.levels.iter().enumerate().filter(|(_, l)| l.files > 0) {
            writeln!(f, "L{i}: {} files, {:.1} MiB", l.files, mib(l.bytes))?;
        }
        Ok(())
    }
}
