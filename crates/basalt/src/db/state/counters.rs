//! The engine's own counters, bumped on the hot paths: per-thread stripes
//! for reads (no shared cache line written by parallel lookups), plain
//! atomics elsewhere. `handles/stats.rs` turns them into the public report.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::striped::StripedCounters;

// The read counters, by index into `Counters::reads`.
pub(crate) const READ_GETS: usize = 0;
pub(crate) const READ_SST_PROBES: usize = 1;
pub(crate) const READ_TIMED_GETS: usize = 2;
pub(crate) const READ_MEMTABLE_NS: usize = 3;
pub(crate) const READ_FILTER_NS: usize = 4;
pub(crate) const READ_INDEX_NS: usize = 5;
pub(crate) const READ_BLOCK_NS: usize = 6;
pub(crate) const READ_SEARCH_NS: usize = 7;
pub(crate) const READ_FILTERED: usize = 8;
pub(crate) const READ_BY_MODEL: usize = 9;
pub(crate) const READ_BY_FENCES: usize = 10;
pub(crate) const READ_WINDOW_SUM: usize = 11;
pub(crate) const READ_INDEX_ENTRIES: usize = 12;
pub(crate) const READ_TABLE_ROWS: usize = 13;
pub(crate) const READ_COUNTERS: usize = 14;

/// Counters updated on the hot paths (relaxed atomics: they are statistics,
/// not synchronisation).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) batches: AtomicU64,
    pub(crate) groups: AtomicU64,
    pub(crate) wal_bytes: AtomicU64,
    pub(crate) wal_syncs: AtomicU64,
    /// Bumped by every read: striped (indices `READ_*`).
    pub(crate) reads: StripedCounters<READ_COUNTERS>,
    pub(crate) ingest_bytes: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) flush_bytes: AtomicU64,
    pub(crate) flush_micros: AtomicU64,
    pub(crate) stalls: AtomicU64,
    pub(crate) stall_micros: AtomicU64,
    pub(crate) stall_micros_max: AtomicU64,
    pub(crate) delayed_groups: AtomicU64,
    pub(crate) delay_micros: AtomicU64,
    pub(crate) memtable_bytes_peak: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) trivial_moves: AtomicU64,
    pub(crate) compaction_read_bytes: AtomicU64,
    pub(crate) compaction_written_bytes: AtomicU64,
    pub(crate) compaction_micros: AtomicU64,
    pub(crate) files_dropped_by_range: AtomicU64,
    pub(crate) files_dropped_expired: AtomicU64,
    pub(crate) filter_removed: AtomicU64,
    pub(crate) filter_changed: AtomicU64,
    pub(crate) switches: AtomicU64,
    pub(crate) switch_micros: AtomicU64,
}

impl Counters {
    pub(crate) fn record_group(&self, batches: u64, wal_bytes: u64, synced: bool) {
        self.batches.fetch_add(batches, Ordering::Relaxed);
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.wal_bytes.fetch_add(wal_bytes, Ordering::Relaxed);
        self.ingest_bytes.fetch_add(wal_bytes, Ordering::Relaxed);
        if synced {
            self.wal_syncs.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn record_lookup(&self, trace: &crate::sst::reader::LookupTrace) {
        let counter = if trace.filtered {
            READ_FILTERED
        } else if trace.by_model && !trace.by_fences {
            self.reads.add(READ_WINDOW_SUM, trace.window);
            READ_BY_MODEL
        } else {
            READ_BY_FENCES
        };
        self.reads.add(counter, 1);
    }

    pub(crate) fn record_timing(&self, t: &GetTiming) {
        self.reads.add(READ_TIMED_GETS, 1);
        for (counter, ns) in [
            (READ_MEMTABLE_NS, t.memtable_ns),
            (READ_FILTER_NS, t.filter_ns),
            (READ_INDEX_NS, t.index_ns),
            (READ_BLOCK_NS, t.block_ns),
            (READ_SEARCH_NS, t.search_ns),
        ] {
            self.reads.add(counter, ns);
        }
    }

    pub(crate) fn record_get(&self, sst_probes: u64) {
        self.reads.add(READ_GETS, 1);
        if sst_probes > 0 {
            self.reads.add(READ_SST_PROBES, sst_probes);
        }
    }

    /// Index entries a lookup, count or planned scan read.
    pub(crate) fn record_index_entries(&self, entries: u64) {
        self.reads.add(READ_INDEX_ENTRIES, entries);
    }

    /// Table rows a scan read (before its filter) or a lookup fetched.
    pub(crate) fn record_table_rows(&self, rows: u64) {
        self.reads.add(READ_TABLE_ROWS, rows);
    }

    pub(crate) fn record_flush(&self, bytes: u64, took: Duration) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.flush_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.flush_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_compaction(&self, read: u64, written: u64, trivial: bool, took: Duration) {
        self.compactions.fetch_add(1, Ordering::Relaxed);
        if trivial {
            self.trivial_moves.fetch_add(1, Ordering::Relaxed);
        } else {
            self.compaction_read_bytes.fetch_add(read, Ordering::Relaxed);
        }
        self.compaction_written_bytes.fetch_add(written, Ordering::Relaxed);
        self.compaction_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_files_dropped_by_range(&self, files: u64) {
        self.files_dropped_by_range.fetch_add(files, Ordering::Relaxed);
    }

    pub(crate) fn record_files_dropped_expired(&self, files: u64) {
        self.files_dropped_expired.fetch_add(files, Ordering::Relaxed);
    }

    /// An entry a compaction filter removed (`true`) or changed.
    pub(crate) fn record_filtered(&self, removed: bool) {
        let counter = if removed { &self.filter_removed } else { &self.filter_changed };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_delay(&self, took: Duration) {
        self.delayed_groups.fetch_add(1, Ordering::Relaxed);
        self.delay_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_memtable_bytes(&self, bytes: usize) {
        self.memtable_bytes_peak.fetch_max(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_switch(&self, took: Duration) {
        self.switches.fetch_add(1, Ordering::Relaxed);
        self.switch_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_stall(&self, took: Duration) {
        let us = took.as_micros() as u64;
        self.stalls.fetch_add(1, Ordering::Relaxed);
        self.stall_micros.fetch_add(us, Ordering::Relaxed);
        self.stall_micros_max.fetch_max(us, Ordering::Relaxed);
    }
}

/// Where one `get` spent its time (with `Options::timing_stats`).
#[derive(Debug, Default, Clone, Copy)]
#[expect(clippy::struct_field_names, reason = "units last in names, as STYLE.md asks")]
pub(crate) struct GetTiming {
    pub memtable_ns: u64,
    pub filter_ns: u64,
    pub index_ns: u64,
    pub block_ns: u64,
    /// Search in the block and copying the value out.
    pub search_ns: u64,
}

impl GetTiming {
    pub(crate) fn add_probe(&mut self, t: &crate::sst::reader::LookupTrace, total_ns: u64) {
        self.filter_ns += t.filter_ns;
        self.index_ns += t.index_ns;
        self.block_ns += t.block_ns;
        self.search_ns += total_ns.saturating_sub(t.filter_ns + t.index_ns + t.block_ns);
    }
}
