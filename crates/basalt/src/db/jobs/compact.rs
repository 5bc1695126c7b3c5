//! Running compactions: the background compaction thread, manual
//! `compact_range`, and the executor that merges input SSTs into outputs.
//! What to compact is decided by the pure policy in `compaction/`.

use std::collections::HashSet;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::blob::BlobWriter;
use crate::codec::internal::{Kind, SeqNo, pack_trailer, unpack_trailer};
use crate::compaction::retain::Retention;
use crate::compaction::{self, CompactionTask};
use crate::compaction_filter::{self, FilterDecision, FilterEntry};
use crate::db::read::cursor::{KeyRange, TreeCursor, file_overlaps};
use crate::db::read::history::HistoryRetention;
use crate::db::state::inner::DbInner;
use crate::db::state::jobs::Interrupted;
use crate::db::state::versions::Memtables;
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::sst::{SstIter, SstWriter};
use crate::version::{BlobFileMeta, FileMeta, LEVELS, Version, VersionEdit};

/// Starts the compaction thread.
pub(crate) fn spawn(inner: Arc<DbInner>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("basalt-compact".into())
        .spawn(move || compaction_loop(&inner))
        .map_err(|e| Error::io("", e))
}

/// How often the compaction thread looks for expired files while a tree
/// has a time to live.
const TTL_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// How often an idle background thread (flush or compaction) looks for
/// work no one woke it for: a choice of compaction per interval when idle.
pub(crate) const IDLE_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

fn compaction_loop(inner: &DbInner) {
    loop {
        let due = || {
            let version = inner.versions.load().version.clone();
            inner.has_covered_files(&version)
                || (inner.opts.auto_compaction && compaction::choose(&version, &inner.opts).is_some())
        };
        // Times to live expire files as time passes, with no write to wake
        // the thread: it looks again every second while a tree has one.
        // Otherwise every `IDLE_RECHECK`: a wake-up missed by a change to
        // what `due` reads left the thread asleep with work due, and a
        // `wait_for_background_work` waiting for it forever (CI hung in
        // outside_review_4 and outside_review_5; not found which change).
        let recheck =
            if inner.versions.load().version.catalog.has_ttl() { TTL_RECHECK } else { IDLE_RECHECK };
        if !inner.jobs.wait_for_work(Some(recheck), due) {
            return;
        }
        // Choose again under the compaction lock: a manual compaction may
        // have changed the version, and a task from an older version could
        // name files that are gone.
        // A compaction a caller runs may hold the lock for long: wait for
        // it, but not past a close (which waits for this thread).
        let _running = loop {
            if let Some(running) = inner.jobs.try_compaction_slot(std::time::Duration::from_millis(20)) {
                break running;
            }
            if inner.jobs.stopping() {
                return;
            }
        };
        if let Err(e) = inner.drop_covered_files() {
            inner.job_failed(e);
            continue;
        }
        if !inner.opts.auto_compaction {
            continue;
        }
        let version = inner.versions.load().version.clone();
        let task = compaction::choose(&version, &inner.opts);
        // Not held through the compaction: a version kept alive here kept
        // the inputs "live", so the collection at its end left them on disk
        // until the next flush or compaction.
        drop(version);
        if let Some(task) = task
            && let Err(e) = inner.run_compaction(&task)
        {
            inner.job_failed(e);
        }
    }
}

impl DbInner {
    /// The error a compaction ended with, returned; it stops writes
    /// (`set_bg_error`: it may have failed an fsync) unless it is the
    /// compaction stopping for a close.
    pub(crate) fn job_failed(&self, e: Error) -> Error {
        if matches!(e, Error::Closed(_)) && self.is_closed() { e } else { self.set_bg_error(e) }
    }

    /// Wakes the compaction thread for a compaction that reads asked for
    /// (a file merged with runs below it by many range reads).
    pub(crate) fn wake_compaction(&self) {
        self.jobs.wake();
    }

    /// Waits until no memtable waits for flush and the policy has no
    /// compaction to run (with `auto_compaction`).
    pub(crate) fn wait_for_background_work(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            // No background work runs.
            return Ok(());
        }
        let busy = || {
            let sv = self.versions.load();
            !sv.imms.is_empty()
                || self.has_covered_files(&sv.version)
                || (self.opts.auto_compaction && compaction::choose(&sv.version, &self.opts).is_some())
        };
        self.jobs
            .wait_while(Some(std::time::Duration::from_millis(50)), busy)
            .map_err(Interrupted::into_error)?;
        // A compaction that already installed its result may still be
        // deleting its inputs, a flush that installed its memtables may
        // still hold the version it checked its new files in, and a
        // collection that ran while another thread held an older version
        // left that version's files: wait for both slots, then collect once
        // more, so the caller finds only live files and no thread of ours
        // holds an old version (CI saw a drop's collection keep the
        // dropped table's file while the flush thread still checked it).
        drop(self.jobs.compaction_slot());
        drop(self.jobs.flush_slot());
        self.delete_obsolete_files(false)
    }

    /// Compacts every file overlapping `range`, level by level, down to the
    /// deepest level holding data; memtables are flushed first.
    pub(crate) fn compact_range(&self, tree: TreeId, range: &KeyRange) -> Result<()> {
        self.flush_all()?;
        let _running = self.jobs.compaction_slot();
        self.drop_covered_files().map_err(|e| self.job_failed(e))?;
        let last = {
            let version = self.versions.load().version.clone();
            let t =
                version.tree(tree).ok_or_else(|| Error::InvalidArgument(format!("unknown tree {tree}")))?;
            (0..LEVELS).rev().find(|&l| !t.levels[l].is_empty()).unwrap_or(0)
        };
        for level in 0..LEVELS - 1 {
            self.check_open()?;
            let version = self.versions.load().version.clone();
            let Some(t) = version.tree(tree) else { break };
            let inputs: Vec<_> = if level == 0 {
                // All of L0 or none: see `task_for`.
                if t.levels[0].iter().any(|f| file_overlaps(f, range)) {
                    t.levels[0].clone()
                } else {
                    Vec::new()
                }
            } else {
                t.levels[level].iter().filter(|f| file_overlaps(f, range)).cloned().collect()
            };
            // The deepest level too where a range tombstone lies over its
            // files: rewritten one level down, they lose what it hides.
            let under = || inputs.iter().any(|f| self.under_tombstone(tree, f));
            if !inputs.is_empty() && (level < last || level == 0 || under()) {
                let task = compaction::picker::task_for(tree, t, level, inputs);
                // A failed compaction may have failed an fsync: as with
                // background compactions, writes stop.
                self.run_compaction(&task).map_err(|e| self.job_failed(e))?;
            }
        }
        self.rewrite_deepest(tree, range)
    }

    /// Rewrites in place the files of `tree`'s deepest level that meet
    /// `range`, when a compaction filter is bound to the tree (as RocksDB's
    /// `kIfHaveCompactionFilter`: a manual compaction shows the filter
    /// every file) or some of their entries expired. Other levels were
    /// rewritten by [`DbInner::compact_range`] on the way down.
    fn rewrite_deepest(&self, tree: TreeId, range: &KeyRange) -> Result<()> {
        let version = self.versions.load().version.clone();
        let Some(t) = version.tree(tree) else { return Ok(()) };
        let Some(deepest) = (1..LEVELS).rev().find(|&l| !t.levels[l].is_empty()) else { return Ok(()) };
        let files: Vec<_> = t.levels[deepest].iter().filter(|f| file_overlaps(f, range)).cloned().collect();
        let expired = self.expired_through(&version.catalog, tree);
        let filtered = self.compaction_filter(&version.catalog, tree).is_some();
        if files.is_empty() || !(filtered || files.iter().any(|f| f.min_seqno <= expired)) {
            return Ok(());
        }
        // The level's files as the "overlapping" run of a task from the
        // level above with no inputs: outputs land where they were.
        let task = CompactionTask {
            tree,
            level: deepest - 1,
            inputs: Vec::new(),
            overlapping: files,
            bottommost: true,
            score: 0.0,
            output_level: deepest,
        };
        self.run_compaction(&task).map_err(|e| self.job_failed(e))
    }

    /// Runs one compaction and installs its result. Its inputs stay on
    /// disk while it reads them, even if their tree is dropped meanwhile:
    /// a drop does not wait for a compaction (writes would wait with it),
    /// and the compaction, finding its tree gone, discards its outputs.
    pub(crate) fn run_compaction(&self, task: &CompactionTask) -> Result<()> {
        // The inputs and the blob files they point into: a drop of the
        // tree meanwhile removes both from the version, and the
        // compaction may still read (move) values out of the blob files.
        let mut inputs: Vec<u64> = task.all_inputs().map(|f| f.number).collect();
        let checked = inputs.len();
        inputs.extend(task.all_inputs().flat_map(|f| f.blob_refs.iter().map(|&(blob, _)| blob)));
        let held = self.versions.hold_if(&self.files, &inputs, |version| {
            let Some(tree) = version.tree(task.tree) else {
                return Ok(false);
            };
            if !inputs[..checked].iter().all(|n| tree.all_files().any(|(_, f)| f.number == *n)) {
                return Err(Error::InvalidArgument(format!(
                    "a compaction of tree {} names files no longer in it",
                    task.tree
                )));
            }
            Ok(true)
        })?;
        if !held {
            return Ok(());
        }
        let result = self.compact_and_install(task);
        self.versions.release(&self.files, &inputs);
        result?;
        // Collect before waking waiters, so `wait_for_background_work`
        // returns with the inputs already deleted.
        let collected = self.delete_obsolete_files(false);
        self.jobs.wake();
        collected
    }

    fn compact_and_install(&self, task: &CompactionTask) -> Result<()> {
        let start = Instant::now();
        let mut edit = VersionEdit::default();
        for f in &task.inputs {
            edit.files_deleted.push((task.tree, task.level, f.number));
        }
        for f in &task.overlapping {
            edit.files_deleted.push((task.tree, task.output_level(), f.number));
        }
        let mut written = 0;
        // The range tombstones the merge knew, and those some output entry
        // still lies under.
        let mut merged_under: Option<MergedUnder> = None;
        // A file under a range tombstone that hides some of its entries is
        // rewritten, not moved: the move would keep what the tombstone hides
        // (and the tombstone with it).
        let trivial = task.is_trivial_move()
            && !task.inputs.iter().any(|f| self.under_tombstone(task.tree, f))
            && !self.settles_flushed_rows(task);
        if trivial {
            for f in &task.inputs {
                let moved = FileMeta { merged_reads: f.merged_reads.carried(), ..(**f).clone() };
                edit.files_added.push((task.tree, task.output_level(), moved));
            }
        } else {
            let (outputs, blob, under) = self.merge_inputs(task)?;
            merged_under = Some(under);
            written = outputs.iter().map(|f| f.size).sum::<u64>() + blob.as_ref().map_or(0, |b| b.size);
            edit.files_added = outputs.into_iter().map(|f| (task.tree, task.output_level(), f)).collect();
            edit.blob_files_added.extend(blob);
        }
        // The files this compaction wrote, held since their numbers were
        // handed out; a trivial move wrote none (its files are inputs,
        // which the caller holds and releases).
        let (numbers, ssts) = if trivial {
            (Vec::new(), 0)
        } else {
            let ssts = edit.files_added.iter().map(|(_, _, f)| f.number);
            let blobs = edit.blob_files_added.iter().map(|b| b.number);
            (ssts.chain(blobs).collect::<Vec<u64>>(), edit.files_added.len())
        };
        let installed = self
            .install(Memtables::Keep, &numbers, |held| {
                // A tree dropped while this ran: its outputs are garbage,
                // left to the collection once no longer pending.
                let Some(tree) = held.current().tree(task.tree) else { return Ok(None) };
                let written = merged_under.as_ref().map(|(known, under)| (known.as_ref(), under));
                // A tree keeping history keeps its tombstones: a key's
                // history lists each as a delete, as long as the window
                // holds it (the outside review's case).
                if self.history_retention(task.tree).is_none() {
                    edit.range_tombstones_dropped = obsolete_after(task.tree, tree, &edit, written);
                }
                edit.tree_ttls = self.grown_expiry_floors(&held.current().catalog);
                Ok(Some(edit))
            })?
            .is_some();
        self.counters.record_compaction(task.input_bytes(), written, trivial, start.elapsed());
        if installed && !trivial {
            self.check_new_ssts(&numbers[..ssts]);
        }
        Ok(())
    }

    /// What a compaction of `task` keeps: the version it starts from, the
    /// tree's history retention and range tombstones, and the retention
    /// they, the snapshots and the tree's expiry floor make.
    fn retention_for(
        &self,
        task: &CompactionTask,
    ) -> (Arc<Version>, Option<HistoryRetention>, Arc<crate::range_del::TombstoneSet>, Retention) {
        // The history floor before the snapshots: a read that checked its
        // point against a later floor is either above this one or listed
        // (`read/history.rs`).
        let history = self.history_retention(task.tree);
        let snapshots: Vec<u64> = self.snapshots.seqnos();
        let version = self.versions.current();
        // The tree's range tombstones: in the version, so logged before
        // any entry they cover is dropped.
        let tombstones =
            version.tree(task.tree).map_or_else(crate::range_del::empty, |t| t.range_tombstones.clone());
        let retention = Retention::with_history(
            snapshots,
            task.bottommost,
            history.and_then(|h| h.floor),
            history.map_or(0, |h| h.versions),
        )
        .with_range_tombstones(tombstones.clone())
        .with_expiry(self.expired_through(&version.catalog, task.tree));
        (version, history, tombstones, retention)
    }

    /// The decision of `filter` (a keyspace's name and filter) on an
    /// entry (its key, trailer, stored value — a blob pointer for a `Blob`
    /// — and SST), counted, as what the compaction writes: a removal is a
    /// delete at the entry's seqno, or nothing at the bottom with no
    /// snapshot (`no_snapshot`), where no older version can show through.
    fn filtered(
        &self,
        (keyspace, filter): &(String, Arc<dyn compaction_filter::CompactionFilter>),
        task: &CompactionTask,
        version: &Version,
        (key, trailer, stored, sst): (&[u8], u64, &[u8], &std::path::Path),
        no_snapshot: bool,
    ) -> Result<Filtered> {
        let seqno = trailer >> 8;
        let value = match unpack_trailer(trailer) {
            Some((_, Kind::Blob)) => self.read_blob_cold(version, stored, sst)?,
            _ => bytes::Bytes::copy_from_slice(stored),
        };
        let entry = FilterEntry {
            keyspace,
            key,
            value: &value,
            seqno,
            level: task.output_level(),
            bottommost: task.bottommost,
        };
        Ok(match compaction_filter::decide(filter.as_ref(), &entry) {
            FilterDecision::Keep => Filtered::Keep,
            FilterDecision::Remove => {
                self.counters.record_filtered(true);
                if task.bottommost && no_snapshot {
                    Filtered::Gone
                } else {
                    Filtered::Write(pack_trailer(seqno, Kind::Delete), Vec::new())
                }
            }
            FilterDecision::ChangeValue(v) => {
                self.counters.record_filtered(false);
                Filtered::Write(pack_trailer(seqno, Kind::Put), v)
            }
        })
    }

    /// The compaction filter bound to keyspace `tree` by name
    /// (`Options::compaction_filters`), with the keyspace's name.
    fn compaction_filter(
        &self,
        catalog: &crate::catalog::Catalog,
        tree: TreeId,
    ) -> Option<(String, Arc<dyn compaction_filter::CompactionFilter>)> {
        if self.opts.compaction_filters.is_empty() {
            return None;
        }
        let def = catalog.tree(tree).filter(|d| matches!(d.kind, crate::catalog::TreeKind::Keyspace))?;
        let (_, f) = self.opts.compaction_filters.iter().find(|(name, _)| *name == def.name)?;
        Some((def.name.clone(), f.clone()))
    }

    /// Whether `task` would move a table's flushed files (L0's) to where its
    /// rows settle while settled files are written otherwise (compressed,
    /// in larger blocks): they are then rewritten, not moved. Rows written
    /// in key order flush to files that would otherwise move down level
    /// after level as they were and never settle: the cost is one rewrite
    /// of each such file. Files of deeper levels were written by a
    /// compaction or a bulk load and move as they are.
    fn settles_flushed_rows(&self, task: &CompactionTask) -> bool {
        task.level == 0
            && task.bottommost
            && self.opts.settled_compression != self.opts.compression
            && self.versions.load().version.catalog.table_layout(task.tree).is_some()
    }

    /// Whether a range tombstone of `tree` in the current version meets
    /// `file` and is newer than its oldest entry (it may hide some).
    fn under_tombstone(&self, tree: TreeId, file: &FileMeta) -> bool {
        let sv = self.versions.load();
        sv.version.tree(tree).is_some_and(|t| {
            t.range_tombstones.tombstones().iter().any(|r| {
                file.min_seqno < r.seqno && r.meets_span(&file.smallest.user_key, &file.largest.user_key)
            })
        })
    }

    /// Whether a range tombstone of some tree hides whole files, or a
    /// tree's time to live expired them, that [`DbInner::drop_covered_files`]
    /// would drop.
    fn has_covered_files(&self, version: &Version) -> bool {
        version.trees.iter().any(|(&id, tree)| {
            (!tree.range_tombstones.is_empty()
                && !compaction::covered::covered_files(tree, |min, t| self.read_between(id, min, t))
                    .is_empty())
                || !self.expired_files(version, id, tree).is_empty()
        })
    }

    /// The files of `tree` (tree `id` of `version`) whose every entry has
    /// expired (`read/ttl.rs`): no reader sees any, snapshots included.
    fn expired_files(
        &self,
        version: &Version,
        id: TreeId,
        tree: &crate::version::TreeVersion,
    ) -> Vec<(usize, u64)> {
        let expired = self.expired_through(&version.catalog, id);
        if expired == crate::db::read::ttl::NOTHING_EXPIRED {
            return Vec::new();
        }
        tree.all_files().filter(|(_, f)| f.max_seqno <= expired).map(|(level, f)| (level, f.number)).collect()
    }

    /// Whether a live snapshot, or a history window, may read `tree` at a
    /// seqno in `[min, t)`.
    fn read_between(&self, tree: TreeId, min: SeqNo, t: SeqNo) -> bool {
        // A tree keeping history keeps its files for the window's reads
        // (and its compactions drop what the window lets go).
        self.history_retention(tree).is_some() || self.snapshots.seqnos().iter().any(|&s| min <= s && s < t)
    }

    /// Drops, in one MANIFEST edit, every file a range tombstone hides from
    /// every reader (without reading it), and the tombstones nothing older
    /// is left under. The caller holds the compaction slot, so no
    /// compaction holds these files as inputs.
    pub(crate) fn drop_covered_files(&self) -> Result<()> {
        let version = self.versions.load().version.clone();
        if !self.has_covered_files(&version) {
            return Ok(());
        }
        let (mut covered, mut expired) = (0, 0);
        self.install(Memtables::Keep, &[], |held| {
            let current = held.current();
            let mut edit = VersionEdit::default();
            (covered, expired) = (0, 0);
            for (&id, tree) in &current.trees {
                let mut files =
                    compaction::covered::covered_files(tree, |min, t| self.read_between(id, min, t));
                covered += files.len();
                for file in self.expired_files(current, id, tree) {
                    if !files.contains(&file) {
                        files.push(file);
                        expired += 1;
                    }
                }
                edit.files_deleted.extend(files.iter().map(|&(level, number)| (id, level, number)));
            }
            for (&id, tree) in &current.trees {
                if self.history_retention(id).is_none() {
                    edit.range_tombstones_dropped.extend(obsolete_after(id, tree, &edit, None));
                }
            }
            if edit.files_deleted.is_empty() {
                return Ok(None);
            }
            edit.tree_ttls = self.grown_expiry_floors(&current.catalog);
            Ok(Some(edit))
        })?;
        self.counters.record_files_dropped_by_range(covered as u64);
        self.counters.record_files_dropped_expired(expired as u64);
        let collected = self.delete_obsolete_files(false);
        self.jobs.wake();
        collected
    }

    /// Merges the inputs, keeping what `Retention` keeps, into SSTs of about
    /// `sst_bytes_target`, cut only between user keys so that files of a
    /// level never share a user key. Values kept in blob files stay where
    /// they are (the pointer is copied), unless their blob file is mostly
    /// garbage: those move to a blob file of this compaction's own.
    fn merge_inputs(
        &self,
        task: &CompactionTask,
    ) -> Result<(Vec<FileMeta>, Option<BlobFileMeta>, MergedUnder)> {
        let mut merged = TreeCursor::over_runs(&self.sst_readers, task.tree, task.input_runs())?;
        let (version, history, tombstones, mut retention) = self.retention_for(task);
        // Tombstones an entry kept lies under (a snapshot, or history, still
        // reads it): they stay in the version.
        let mut kept_under: HashSet<SeqNo> = HashSet::new();
        let layout = version.catalog.table_layout(task.tree);
        let mut relocation = BlobRelocation::new(&version, self.opts.blob_gc_garbage_percent);
        #[cfg(test)]
        before_merge::run(self.id);
        if let Some(op) = self.merge_operator(&version.catalog, task.tree)? {
            let folding = Folding { retention, tombstones, op, relocation };
            return self.merge_folding(task, merged, folding, &version);
        }
        // A keyspace's compaction filter, unless the keyspace keeps history
        // (whose versions are the window's to drop).
        let filter = (layout.is_none() && history.is_none())
            .then(|| self.compaction_filter(&version.catalog, task.tree))
            .flatten();
        let mut outputs = Vec::new();
        let mut current: Option<(TreeId, u64, SstWriter)> = None;
        let mut last_key: Vec<u8> = Vec::new();
        let mut kept_any = false;
        // The last input block of an older schema version, read into the
        // current one (held, so its address is not reused meanwhile).
        let mut adapted: Option<(Arc<crate::sst::block::Block>, Vec<arrow_array::ArrayRef>)> = None;
        while let Some(source) = merged.next_source() {
            let entry = &merged.sources()[source];
            // Every source of a compaction is a run of SSTs, on a block.
            let (Some((key, trailer)), Some((block, i))) =
                (entry.key(), entry.sst().and_then(SstIter::current))
            else {
                return Err(Error::internal("compaction cursor lost its block"));
            };
            let Some((seqno, kind)) = unpack_trailer(trailer) else {
                return Err(block.corruption(format!("an entry of unknown kind {trailer:#x}")));
            };
            if retention.keep(key, seqno, kind) {
                let first_of_key = !kept_any || key != last_key.as_slice();
                kept_any = true;
                // What the filter makes of the key's newest value that no
                // snapshot sees past: `None` to keep it as it is.
                let mut filtered = None;
                if let Some(filter) = &filter
                    && first_of_key
                    && matches!(kind, Kind::Put | Kind::Blob)
                    && retention.stripe(seqno) == retention.newest_stripe()
                {
                    let sst = entry.sst().map_or(std::path::Path::new(""), |it| it.reader().path());
                    let alone = retention.newest_stripe() == 0;
                    filtered = match self.filtered(
                        filter,
                        task,
                        &version,
                        (key, trailer, block.value(i), sst),
                        alone,
                    )? {
                        Filtered::Keep => None,
                        Filtered::Write(trailer, v) => Some((trailer, v)),
                        Filtered::Gone => {
                            merged.step(source)?;
                            continue;
                        }
                    };
                }
                if !tombstones.is_empty() {
                    kept_under.extend(tombstones.all_covering(key).iter().filter(|&&t| t > seqno));
                }
                let full = current.as_ref().is_some_and(|(_, _, w)| {
                    w.estimated_file_bytes() >= task.output_sst_bytes(&self.opts)
                        && key != last_key.as_slice()
                });
                if full && let Some(done) = current.take() {
                    outputs.push(crate::db::jobs::flush::finish_sst(done)?.1);
                    // A close does not wait for the rest.
                    self.check_open()?;
                }
                if current.is_none() {
                    current = Some(self.start_sst(task.tree, layout.clone(), task.bottommost)?);
                }
                if let Some((_, _, w)) = current.as_mut() {
                    match &layout {
                        None if let Some((trailer, value)) = &filtered => w.add(key, *trailer, value)?,
                        None if kind == Kind::Blob => {
                            let sst = entry.sst().map_or(std::path::Path::new(""), |it| it.reader().path());
                            let pointer = relocation.pointer(self, &version, block.value(i), sst)?;
                            w.add(key, trailer, pointer)?;
                        }
                        None => w.add(key, trailer, block.value(i))?,
                        Some(layout) => {
                            let file_version =
                                entry.sst().map_or(layout.version(), |it| it.reader().schema_version());
                            add_table_row(w, layout, file_version, (block, i), (key, trailer), &mut adapted)?;
                        }
                    }
                }
                last_key.clear();
                last_key.extend_from_slice(key);
            }
            merged.step(source)?;
        }
        if let Some(done) = current.take() {
            outputs.push(crate::db::jobs::flush::finish_sst(done)?.1);
        }
        let blob = relocation.writer.take().map(crate::db::jobs::flush::finish_blob_file).transpose()?;
        if !outputs.is_empty() || blob.is_some() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok((outputs, blob, (tombstones, kept_under)))
    }
}

/// Adds row `i` of `block`, a block of a file of schema version
/// `file_version`, to `w` under the current `layout`: table rows are copied
/// column by column from the input block's arrays; a block of an older
/// schema version's file is read into this one once (`adapted` holds the
/// last such block, so its address is not reused meanwhile).
pub(crate) fn add_table_row(
    w: &mut SstWriter,
    layout: &crate::row::layout::TableLayout,
    file_version: u32,
    (block, i): (&Arc<crate::sst::block::Block>, usize),
    (key, trailer): (&[u8], u64),
    adapted: &mut Option<(Arc<crate::sst::block::Block>, Vec<arrow_array::ArrayRef>)>,
) -> Result<()> {
    match layout.older_version(file_version).map_err(|e| block.corruption(e.reason()))? {
        None => {
            let arrays = block.arrays(layout).map_err(|e| block.corruption(e))?;
            w.add_from_arrays(key, trailer, arrays, i)
        }
        Some(older) => {
            if !adapted.as_ref().is_some_and(|(b, _)| Arc::ptr_eq(b, block)) {
                let arrays = block.arrays(&older.layout).map_err(|e| block.corruption(e))?;
                *adapted = Some((block.clone(), older.map().adapt(layout, arrays, block.len())?));
            }
            match adapted {
                Some((_, arrays)) => w.add_from_arrays(key, trailer, arrays, i),
                None => Ok(()),
            }
        }
    }
}

/// What a compaction writes of an entry a filter was asked about.
enum Filtered {
    /// The entry as it is.
    Keep,
    /// Nothing.
    Gone,
    /// This trailer and value instead.
    Write(u64, Vec<u8>),
}

/// The range tombstones of `tree` (tree `id` before `edit`) that hide
/// nothing once `edit` is applied, as records dropping them. Every file is
/// judged by its key span: one that meets a tombstone's range and holds an
/// entry older than it may hold a key it hides. With `written` (the
/// tombstones a compaction merged its inputs under, and those an entry it
/// kept lies under), the compaction's outputs are judged exactly for the
/// tombstones it knew: an output's span may cross a range it holds no key
/// of. A tombstone flushed while it ran is judged by spans alone.
fn obsolete_after(
    id: TreeId,
    tree: &crate::version::TreeVersion,
    edit: &VersionEdit,
    written: Option<(&crate::range_del::TombstoneSet, &HashSet<SeqNo>)>,
) -> Vec<(TreeId, SeqNo)> {
    if tree.range_tombstones.is_empty() {
        return Vec::new();
    }
    let deleted: HashSet<u64> =
        edit.files_deleted.iter().filter(|(t, _, _)| *t == id).map(|&(_, _, number)| number).collect();
    let kept: Vec<&FileMeta> =
        tree.all_files().map(|(_, f)| f.as_ref()).filter(|f| !deleted.contains(&f.number)).collect();
    let added: Vec<&FileMeta> =
        edit.files_added.iter().filter(|(t, _, _)| *t == id).map(|(_, _, f)| f).collect();
    let all: Vec<&FileMeta> = kept.iter().chain(added.iter()).copied().collect();
    let by_span = compaction::covered::obsolete_tombstones(&tree.range_tombstones, &all);
    let exact = written.map_or_else(Vec::new, |(known, under)| {
        compaction::covered::obsolete_tombstones(&tree.range_tombstones, &kept)
            .into_iter()
            .filter(|s| known.tombstones().iter().any(|t| t.seqno == *s) && !under.contains(s))
            .collect()
    });
    let mut obsolete: Vec<SeqNo> = by_span.into_iter().chain(exact).collect();
    obsolete.sort_unstable();
    obsolete.dedup();
    obsolete
        .into_iter()
        .filter(|s| !edit.range_tombstones_dropped.contains(&(id, *s)))
        .map(|s| (id, s))
        .collect()
}

/// What a compaction of a keyspace with a merge operator folds with.
struct Folding {
    retention: Retention,
    tombstones: Arc<crate::range_del::TombstoneSet>,
    op: Arc<dyn crate::merge::MergeOperator>,
    relocation: BlobRelocation,
}

/// One version of the key a folding compaction holds, with the SST it came
/// from (a blob pointer's file, for errors).
struct Held {
    version: crate::merge::Version,
    sst: std::path::PathBuf,
}

impl DbInner {
    /// [`DbInner::merge_inputs`] for a keyspace with a merge operator: every
    /// version of a key is held, then what `compaction/fold.rs` keeps of
    /// them (runs of operands folded) is written.
    fn merge_folding(
        &self,
        task: &CompactionTask,
        mut merged: TreeCursor,
        mut f: Folding,
        version: &Version,
    ) -> Result<(Vec<FileMeta>, Option<BlobFileMeta>, MergedUnder)> {
        let mut outputs = Vec::new();
        let mut current: Option<(TreeId, u64, SstWriter)> = None;
        let mut kept_under: HashSet<SeqNo> = HashSet::new();
        let mut key: Vec<u8> = Vec::new();
        let mut held: Vec<Held> = Vec::new();
        loop {
            let next = merged.next_source();
            let entry = next.and_then(|i| merged.sources()[i].key());
            if entry.is_none_or(|(k, _)| k != key.as_slice()) && !held.is_empty() {
                let versions = held.iter().map(|h| h.version.clone()).collect();
                let kept = crate::compaction::fold::fold_key(
                    versions,
                    |s| f.retention.stripe(s),
                    task.bottommost,
                    f.tombstones.all_covering(&key),
                    f.op.as_ref(),
                );
                // A file is cut only between keys: files of a level never
                // share one.
                let full = current
                    .as_ref()
                    .is_some_and(|(_, _, w)| w.estimated_file_bytes() >= task.output_sst_bytes(&self.opts));
                if full && let Some(done) = current.take() {
                    outputs.push(crate::db::jobs::flush::finish_sst(done)?.1);
                    self.check_open()?;
                }
                for v in kept {
                    kept_under.extend(f.tombstones.all_covering(&key).iter().filter(|&&t| t > v.seqno));
                    let (_, _, w) = match &mut current {
                        Some(c) => c,
                        None => current.insert(self.start_sst(task.tree, None, task.bottommost)?),
                    };
                    let trailer = crate::codec::internal::pack_trailer(v.seqno, v.kind);
                    if v.kind == Kind::Blob {
                        let sst = held.iter().find(|h| h.version.seqno == v.seqno).map(|h| h.sst.as_path());
                        let sst = sst.unwrap_or(std::path::Path::new(""));
                        let pointer = f.relocation.pointer(self, version, &v.value, sst)?;
                        w.add(&key, trailer, pointer)?;
                    } else {
                        w.add(&key, trailer, &v.value)?;
                    }
                }
                held.clear();
            }
            let Some(i) = next else { break };
            let source = &merged.sources()[i];
            let (Some((k, trailer)), Some((block, row))) =
                (source.key(), source.sst().and_then(SstIter::current))
            else {
                return Err(Error::internal("compaction cursor lost its block"));
            };
            let Some((seqno, kind)) = unpack_trailer(trailer) else {
                return Err(block.corruption(format!("an entry of unknown kind {trailer:#x}")));
            };
            if held.is_empty() {
                key.clear();
                key.extend_from_slice(k);
            }
            let sst =
                source.sst().map_or_else(std::path::PathBuf::new, |it| it.reader().path().to_path_buf());
            held.push(Held {
                version: crate::merge::Version { seqno, kind, value: block.value(row).to_vec() },
                sst,
            });
            merged.step(i)?;
        }
        if let Some(done) = current.take() {
            outputs.push(crate::db::jobs::flush::finish_sst(done)?.1);
        }
        let blob = f.relocation.writer.take().map(crate::db::jobs::flush::finish_blob_file).transpose()?;
        if !outputs.is_empty() || blob.is_some() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok((outputs, blob, (f.tombstones, kept_under)))
    }
}

/// The range tombstones a compaction merged its inputs under, and those an
/// entry it kept lies under.
type MergedUnder = (Arc<crate::range_del::TombstoneSet>, HashSet<SeqNo>);

/// Which blob files a compaction empties, and the blob file it moves their
/// values to.
struct BlobRelocation {
    /// Blob files whose garbage reached `blob_gc_garbage_percent`.
    draining: HashSet<u64>,
    writer: Option<BlobWriter>,
    /// The moved value's new pointer, encoded.
    pointer: Vec<u8>,
}

impl BlobRelocation {
    fn new(version: &Version, garbage_percent: u32) -> Self {
        let live = version.blob_live_bytes();
        let draining = version
            .blobs
            .values()
            .filter(|b| {
                let live = live.get(&b.number).copied().unwrap_or(0).min(b.value_bytes);
                // garbage / total >= percent / 100, in integers wide
                // enough for any counts a MANIFEST may hold.
                u128::from(b.value_bytes - live) * 100
                    >= u128::from(b.value_bytes) * u128::from(garbage_percent)
            })
            .map(|b| b.number)
            .collect();
        BlobRelocation { draining, writer: None, pointer: Vec::new() }
    }

    /// The pointer to write for the `Blob` entry `pointer` of SST `sst`:
    /// itself, or where its value was moved to.
    fn pointer<'a>(
        &'a mut self,
        db: &DbInner,
        version: &Version,
        pointer: &'a [u8],
        sst: &std::path::Path,
    ) -> Result<&'a [u8]> {
        if self.draining.is_empty() {
            // Nothing moves (the writer still checks the pointer).
            return Ok(pointer);
        }
        let decoded = crate::blob::BlobPointer::decode(pointer, sst)?;
        if !self.draining.contains(&decoded.file) {
            return Ok(pointer);
        }
        let value = crate::db::read::point::read_blob(&db.blob_files, version, pointer, sst)?;
        let writer = match &mut self.writer {
            Some(w) => w,
            None => self.writer.insert(db.start_blob_file()?),
        };
        self.pointer.clear();
        writer.add(&value)?.encode_to(&mut self.pointer);
        Ok(&self.pointer)
    }
}

/// A test hook run by a compaction of one database just before it merges
/// its inputs (its version and the blob files it empties chosen), so a
/// test can act while a compaction is running.
#[cfg(test)]
pub(crate) mod before_merge {
    use std::collections::HashMap;

    use parking_lot::Mutex;

    type Hook = Box<dyn FnOnce() + Send>;

    static HOOKS: Mutex<Option<HashMap<u64, Hook>>> = Mutex::new(None);

    /// Runs `f` in the next compaction of database `db` (its `DbInner::id`).
    pub(crate) fn set(db: u64, f: impl FnOnce() + Send + 'static) {
        HOOKS.lock().get_or_insert_with(HashMap::new).insert(db, Box::new(f));
    }

    pub(crate) fn run(db: u64) {
        let hook = HOOKS.lock().as_mut().and_then(|h| h.remove(&db));
        if let Some(f) = hook {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::io::MemFs;
    use crate::{Db, Options};

    /// A range tombstone flushed while a compaction merges entries it
    /// covers, which the merge did not know of: its outputs still hold
    /// those entries, so the tombstone must stay (the table model caught
    /// it dropped, the keys back, once in several runs).
    #[test]
    fn a_tombstone_flushed_during_a_compaction_outlives_it() {
        let fs = MemFs::new();
        let opts = Options { fs: Arc::new(fs.clone()), auto_compaction: false, ..Options::default() };
        let db = Arc::new(Db::open("/db", opts).expect("open"));
        for i in 0..100u32 {
            db.put(format!("k{i:03}"), "v").expect("put");
        }
        db.flush().expect("flush");
        let db2 = db.clone();
        super::before_merge::set(db.inner().id, move || {
            db2.delete_range("k010".."k020").expect("delete_range");
            db2.flush().expect("flush");
        });
        db.compact_range::<&[u8]>(..).expect("compact");
        db.wait_for_background_work().expect("settled");
        assert_eq!(db.get("k015").expect("get"), None, "{}", db.stats());
        assert_eq!(db.iter::<&[u8]>(..).count(), 90);
        // A compaction that knows it drops the keys and then the tombstone.
        db.compact_range::<&[u8]>(..).expect("compact");
        assert_eq!((db.stats().range_tombstones, db.iter::<&[u8]>(..).count()), (0, 90));
    }

    /// The restructuring issue's defect: `drop_table` took the compaction
    /// lock while owning the write path, so every write waited for a
    /// running compaction. Now the drop and later writes finish while a
    /// compaction of the dropped tree is still running; the compaction
    /// then discards its outputs, and every file of the tree is collected.
    #[test]
    fn a_drop_and_writes_do_not_wait_for_a_compaction_of_the_dropped_tree() {
        let fs = MemFs::new();
        let opts = Options { fs: Arc::new(fs.clone()), auto_compaction: false, ..Options::default() };
        let db = Arc::new(Db::open("/db", opts).expect("open"));
        let doomed = db.create_keyspace("doomed").expect("create");
        for round in 0..3 {
            for i in 0..200 {
                doomed.put(format!("key{i:04}"), format!("value {round}")).expect("put");
            }
            db.flush().expect("flush");
        }
        let tree = db.inner().find_tree(crate::catalog::Namespace::Keyspaces, "doomed").expect("tree").0;
        drop(doomed);
        let (entered, entered_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        super::before_merge::set(db.inner().id, move || {
            entered.send(()).expect("test waits");
            release_rx.recv().expect("test releases");
        });
        let inner = db.inner().clone();
        let compaction =
            std::thread::spawn(move || inner.compact_range(tree, &(Bound::Unbounded, Bound::Unbounded)));
        entered_rx.recv_timeout(Duration::from_secs(30)).expect("the compaction started");
        let (done, done_rx) = mpsc::channel();
        let db2 = db.clone();
        std::thread::spawn(move || {
            let result = db2.drop_keyspace("doomed").and_then(|()| db2.put("after", "the drop"));
            done.send(result).expect("test waits");
        });
        let finished = done_rx.recv_timeout(Duration::from_secs(10));
        release.send(()).expect("compaction waits");
        finished.expect("the drop and a write finished while the compaction ran").expect("drop and put");
        compaction.join().expect("no panic").expect("the compaction of a dropped tree is no error");
        db.wait_for_background_work().expect("settled");
        let ssts = fs
            .file_names(std::path::Path::new("/db"))
            .into_iter()
            .filter(|n| std::path::Path::new(n).extension().is_some_and(|e| e == "sst"))
            .count();
        assert_eq!(ssts, 0, "every file of the dropped keyspace was collected");
        assert_eq!(db.get("after").expect("get").as_deref(), Some(&b"the drop"[..]));
        assert_eq!(db.keyspaces(), vec!["default".to_string()]);
    }

    /// Issue 60: under a write budget that makes small L0 files, a run of
    /// them is merged into one L0 file before L0 goes down. That merge is
    /// not bottommost: a delete, a range delete and merge operands in it
    /// still hide, or fold onto, what the levels below hold.
    #[test]
    fn an_l0_merge_keeps_deletes_and_operands_for_the_levels_below() {
        let opts = Options {
            fs: Arc::new(MemFs::new()),
            write_buffer_bytes_max: 1 << 20,
            memtable_bytes_max: 1 << 20,
            l0_compaction_trigger: 4,
            ..Options::default()
        };
        let db = Db::open("/db", opts).expect("open");
        let counters = db.create_keyspace("counters").expect("create");
        counters.set_merge_operator("add_i64").expect("bind");
        let tree = |name| db.inner().find_tree(crate::catalog::Namespace::Keyspaces, name).expect("tree").0;
        let (plain, folded) = (tree("default"), tree("counters"));
        for i in 0..100 {
            db.put(format!("k{i:03}"), "old").expect("put");
            counters.merge(format!("c{i:03}"), 10i64.to_le_bytes()).expect("merge");
        }
        db.flush().expect("flush");
        db.compact_range::<&[u8]>(..).expect("compact");
        counters.compact_range::<&[u8]>(..).expect("compact");
        // Four flushes, each an L0 file of both trees over L1's keys.
        let rounds: [(&str, &str, i64); 4] =
            [("k000", "c000", 1), ("k030", "c000", 2), ("k050", "c001", 4), ("k099", "c000", 8)];
        for (round, (key, counter, n)) in rounds.into_iter().enumerate() {
            match round {
                0 => db.delete(key).expect("delete"),
                1 => {
                    db.delete_range("k010".."k020").expect("delete_range");
                    db.put(key, "new").expect("put");
                }
                _ => db.put(key, "new").expect("put"),
            }
            counters.merge(counter, n.to_le_bytes()).expect("merge");
            db.flush().expect("flush");
        }
        db.wait_for_background_work().expect("settled");
        for t in [plain, folded] {
            let levels = level_files(&db, t);
            assert_eq!(levels[0], 1, "the four L0 files merged in L0: {levels:?}\n{}", db.stats());
            assert!(levels[1..].iter().sum::<usize>() >= 1, "the levels below untouched: {levels:?}");
        }
        assert_eq!(db.get("k000").expect("get"), None, "the delete still hides L1's version");
        assert_eq!(db.get("k015").expect("get"), None, "the range delete still hides L1's versions");
        assert_eq!(db.get("k030").expect("get").as_deref(), Some(&b"new"[..]));
        assert_eq!(db.get("k001").expect("get").as_deref(), Some(&b"old"[..]));
        assert_eq!(db.iter::<&[u8]>(..).count(), 89);
        let count = |key: &str| {
            let v = counters.get(key).expect("get").expect("a counter");
            i64::from_le_bytes(v.as_ref().try_into().expect("8 bytes"))
        };
        assert_eq!(
            (count("c000"), count("c001"), count("c002")),
            (21, 14, 10),
            "operands folded onto L1's base"
        );
    }

    /// Files of each level of `tree`.
    fn level_files(db: &Db, tree: crate::ids::TreeId) -> Vec<usize> {
        let sv = db.inner().versions.load();
        sv.version.tree(tree).map(|t| t.levels.iter().map(Vec::len).collect()).unwrap_or_default()
    }

    /// Issue 37: an index whose few L0 files never reach the trigger made
    /// every lookup seek and merge each of them. Range reads that merge a
    /// file with runs below it now count against it; past its allowance it
    /// asks for a compaction, and the background thread merges the runs
    /// (point reads, which skip files by their filters, count nothing).
    #[test]
    fn range_reads_that_merge_runs_ask_for_the_compaction_that_ends_it() {
        use arrow_array::{ArrayRef, Int64Array, RecordBatch};
        use arrow_schema::{DataType, Field, Schema};

        use crate::{IndexOptions, IndexPredicate, KeyValue, TableOptions};

        let opts = Options { fs: Arc::new(MemFs::new()), ..Options::default() };
        let db = Db::open("/db", opts).expect("open");
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ]));
        let t = db.create_table("t", schema.clone(), &["id"], TableOptions::default()).expect("table");
        t.create_index("by_v", &["v"], IndexOptions::default()).expect("index");
        // Three flushes: three L0 files in each tree, one short of the trigger.
        for round in 0..3i64 {
            let ids: Vec<i64> = (0..300).map(|i| i * 3 + round).collect();
            let cols: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(Int64Array::from(ids.iter().map(|i| i % 50).collect::<Vec<_>>())),
            ];
            t.write(&RecordBatch::try_new(schema.clone(), cols).expect("batch")).expect("write");
            db.flush().expect("flush");
        }
        db.wait_for_background_work().expect("settled");
        let index = db
            .inner()
            .find_tree(crate::catalog::Namespace::IndexesOf(t.tree()), "by_v")
            .expect("index tree")
            .0;
        assert_eq!(level_files(&db, index)[0], 3, "three L0 files, below the trigger");
        let compactions = db.stats().compactions;
        // Point reads count nothing.
        for i in 0..500 {
            t.get(&[KeyValue::I64(i)]).expect("get");
        }
        db.wait_for_background_work().expect("settled");
        assert_eq!(db.stats().compactions, compactions, "point reads asked for nothing");
        // Short range reads: each merges the two newer L0 files with the
        // oldest; a file allows at least 100 of them.
        for round in 0..150 {
            let n =
                t.count("by_v", IndexPredicate::Eq(vec![Some(KeyValue::I64(round % 50))])).expect("count");
            assert_eq!(n, 18, "round {round}");
        }
        db.wait_for_background_work().expect("settled");
        let levels = level_files(&db, index);
        assert_eq!(levels[0], 0, "the reads asked for the L0 files to be compacted: {levels:?}");
        assert!(db.stats().compactions > compactions);
        for v in 0..50 {
            assert_eq!(t.count("by_v", IndexPredicate::Eq(vec![Some(KeyValue::I64(v))])).expect("count"), 18);
        }
        // The table's own tree was only read by point: its L0 stays.
        assert_eq!(level_files(&db, t.tree())[0], 3);
    }

    /// The outside review of blob files: a drop of a keyspace while a
    /// background compaction of it moves values out of a mostly-garbage
    /// blob file deleted that blob file under the compaction (which holds
    /// no registered version), whose read then failed and stopped writes.
    /// The blob files its inputs point into now stay in use until the
    /// compaction ends.
    #[test]
    fn a_drop_while_a_compaction_moves_blob_values_does_not_stop_writes() {
        let fs = MemFs::new();
        let opts = |auto_compaction| Options {
            fs: Arc::new(fs.clone()),
            auto_compaction,
            l0_compaction_trigger: 2,
            blob_value_bytes_min: 10,
            blob_gc_garbage_percent: 1,
            ..Options::default()
        };
        let value = |round: usize| format!("value of round {round} ").repeat(8);
        {
            let db = Db::open("/db", opts(false)).expect("open");
            let doomed = db.create_keyspace("doomed").expect("create");
            for i in 0..200 {
                doomed.put(format!("key{i:04}"), value(0)).expect("put");
            }
            db.flush().expect("flush");
            for i in (0..200).step_by(2) {
                doomed.put(format!("key{i:04}"), value(1)).expect("overwrite");
            }
            // Half of the first blob file is garbage once this compaction
            // drops the overwritten versions.
            doomed.compact_range::<&[u8]>(..).expect("compact");
            db.close().expect("close");
        }
        let db = Arc::new(Db::open("/db", opts(true)).expect("reopen"));
        let (entered, entered_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        super::before_merge::set(db.inner().id, move || {
            entered.send(()).expect("test waits");
            release_rx.recv().expect("test releases");
        });
        {
            let doomed = db.keyspace("doomed").expect("keyspace");
            for round in 2..4 {
                for i in 0..10 {
                    doomed.put(format!("key{i:04}"), value(round)).expect("put");
                }
                db.flush().expect("flush");
            }
        }
        // Two L0 files: the background compaction merges them with L1,
        // moving the first blob file's live values.
        entered_rx.recv_timeout(Duration::from_secs(30)).expect("the compaction started");
        db.drop_keyspace("doomed").expect("drop");
        release.send(()).expect("compaction waits");
        db.wait_for_background_work().expect("the compaction read the values it moves");
        db.put("after", "the drop").expect("writes go on");
        let left: Vec<String> = fs
            .file_names(std::path::Path::new("/db"))
            .into_iter()
            .filter(|n| std::path::Path::new(n).extension().is_some_and(|e| e == "sst" || e == "blob"))
            .collect();
        assert!(left.is_empty(), "every file of the dropped keyspace was collected: {left:?}");
    }
}
