//! Point lookups: memtables newest first, then L0 newest first, then one
//! file per deeper level. The first version found decides.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::time::Instant;

use bytes::Bytes;

use super::{DbInner, SuperVersion};
use crate::codec::internal::{Kind, SeqNo, unpack_trailer};
use crate::error::{Error, Result};
use crate::sst::filter::key_hash;
use crate::sst::reader::LookupTrace;
use crate::wal::batch::TreeId;

impl DbInner {
    /// The seqno to read at and the state to read from. The seqno is loaded
    /// first: a seqno published by a writer implies the memtable it wrote
    /// to is already installed.
    pub(crate) fn read_view(&self, snapshot: Option<SeqNo>) -> (SeqNo, Arc<SuperVersion>) {
        let seqno = snapshot.unwrap_or_else(|| self.visible_seqno.load(Ordering::Acquire));
        (seqno, self.state.load_full())
    }

    /// The value of `user_key` in `tree` as of `snapshot` (or now).
    pub(crate) fn get(
        &self,
        tree: TreeId,
        user_key: &[u8],
        snapshot: Option<SeqNo>,
    ) -> Result<Option<Bytes>> {
        // As `read_view`, but borrowing the super version: no reference
        // count to update for a lookup that returns before anything changes.
        let seqno = snapshot.unwrap_or_else(|| self.visible_seqno.load(Ordering::Acquire));
        let sv = self.state.load();
        let timed = self.opts.timing_stats;
        let clock = timed.then(Instant::now);
        let mut timing = GetTiming::default();
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            if let Some((trailer, value)) = mem.get(tree, user_key, seqno) {
                self.counters.record_get(0);
                if let Some(c) = clock {
                    timing.memtable_ns = c.elapsed().as_nanos() as u64;
                    self.counters.record_timing(&timing);
                }
                return Ok(visible(trailer, value));
            }
        }
        timing.memtable_ns = clock.map_or(0, |c| c.elapsed().as_nanos() as u64);
        let Some(tree_version) = sv.version.tree(tree) else {
            return Err(Error::InvalidArgument(format!("unknown tree {tree}")));
        };
        let hash = key_hash(user_key);
        // Each file's filter line is a cache miss of its own at scale; load
        // them all first so the misses overlap (files not yet opened are
        // opened by the loop below).
        let touched = tree_version
            .files_for_key(user_key)
            .filter_map(|file| file.reader.get())
            .fold(0, |acc, reader| acc ^ reader.touch_filter(hash));
        std::hint::black_box(touched);
        let mut probes = 0;
        for file in tree_version.files_for_key(user_key) {
            probes += 1;
            let reader = self.table_cache.reader(file, &self.block_cache)?;
            let mut trace = LookupTrace { timed, ..LookupTrace::default() };
            let probe = timed.then(Instant::now);
            // The filter before the row cache: a key the file lacks costs
            // no hash lookup.
            let mut row_hit = false;
            let found = if !reader.filter_hash_traced(hash, &mut trace) {
                None
            } else if let Some(row) =
                self.row_cache.as_ref().and_then(|r| r.get(file.number, user_key, seqno))
            {
                row_hit = true;
                Some(row)
            } else {
                let found = reader.get_unfiltered(user_key, seqno, &mut trace)?;
                if let (Some(rows), Some((trailer, value))) = (&self.row_cache, &found)
                    && seqno >= file.max_seqno
                {
                    // This lookup saw every version in the file: it found the newest.
                    rows.insert(file.number, user_key, *trailer, value.clone());
                }
                found
            };
            // A row cache hit is counted by the row cache, not as a probe
            // of the file's index.
            if !row_hit {
                self.counters.record_lookup(&trace);
            }
            let result = found.map(|(trailer, value)| visible(trailer, value));
            if let Some(p) = probe {
                timing.add_probe(&trace, p.elapsed().as_nanos() as u64);
            }
            if let Some(value) = result {
                self.counters.record_get(probes);
                if timed {
                    self.counters.record_timing(&timing);
                }
                return Ok(value);
            }
        }
        self.counters.record_get(probes);
        if timed {
            self.counters.record_timing(&timing);
        }
        Ok(None)
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
    fn add_probe(&mut self, t: &LookupTrace, total_ns: u64) {
        self.filter_ns += t.filter_ns;
        self.index_ns += t.index_ns;
        self.block_ns += t.block_ns;
        self.search_ns += total_ns.saturating_sub(t.filter_ns + t.index_ns + t.block_ns);
    }
}

fn visible(trailer: u64, value: Bytes) -> Option<Bytes> {
    match unpack_trailer(trailer) {
        Some((_, Kind::Put)) => Some(value),
        _ => None,
    }
}
