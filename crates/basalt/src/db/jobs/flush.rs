//! Flushing: the background thread that turns immutable memtables into L0
//! SSTs and logs them to the MANIFEST; the WALs it makes obsolete are
//! deleted by `jobs/cleanup.rs`.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::blob::BlobWriter;
use crate::catalog::TreeKind;
use crate::codec::internal::{Kind, pack_trailer, unpack_trailer};
use crate::db::state::inner::DbInner;
use crate::db::state::jobs::Interrupted;
use crate::db::state::versions::Memtables;
use crate::error::{Error, Result};
use crate::files;
use crate::ids::TreeId;
use crate::io::WritebackEvery;
use crate::memtable::Memtable;
use crate::row::layout::TableLayout;
use crate::sst::writer::{SstWriter, SstWriterOptions};
use crate::version::edit::ReaderSlot;
use crate::version::{BlobFileMeta, FileMeta, VersionEdit};

/// An SST being written starts the writeback of each MiB as it goes, so
/// its fsync at the end waits for the last MiB rather than the whole file,
/// and the device writes while the flush or compaction builds the rest
/// (the fsync of an 8 MiB flush took 9-13 ms before, 2-4 ms after).
const SST_WRITEBACK_BYTES: u64 = 1 << 20;

/// SSTs whose check for in-place reads waits for the end of a flush
/// backlog; beyond this, the oldest are left to their first lookups.
const UNCHECKED_SSTS_MAX: usize = 64;

/// Starts the flush thread.
pub(crate) fn spawn(inner: Arc<DbInner>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("basalt-flush".into())
        .spawn(move || flush_loop(&inner))
        .map_err(|e| Error::io("", e))
}

fn flush_loop(inner: &DbInner) {
    // SSTs flushed while more memtables waited, whose blocks are checked
    // once none waits.
    let mut unchecked = Vec::new();
    loop {
        // Looks again now and then (see `compact::IDLE_RECHECK`).
        let recheck = Some(super::compact::IDLE_RECHECK);
        if !inner.jobs.wait_for_work(recheck, || !inner.versions.load().imms.is_empty()) {
            return;
        }
        let _flushing = inner.jobs.flush_slot();
        if let Err(e) = inner.flush_immutables(&mut unchecked) {
            inner.set_bg_error(e);
        }
    }
}

impl DbInner {
    /// Flushes every immutable memtable waiting, together, and installs
    /// the result: one L0 SST per tree however many memtables queued up.
    /// When flushing falls behind (a tight write-buffer budget, a burst),
    /// the memtables it finds waiting become one larger file instead of one
    /// file each: fewer L0 files for compaction to merge and for lookups to
    /// probe, and one fsync, directory sync and MANIFEST edit for all (as
    /// RocksDB's flush picks every immutable memtable).
    ///
    /// While more memtables wait, writers may be held back by the memory
    /// they hold, so they are flushed first: checking the new SSTs' blocks
    /// for in-place reads (their numbers go to `unchecked`, at most
    /// [`UNCHECKED_SSTS_MAX`]; a lookup checks a block it finds unchecked)
    /// and collecting obsolete files (the compaction thread collects too)
    /// wait until none does. Under a 32 MiB budget the two took 4-9 ms of
    /// each 8 MiB flush's 33.
    fn flush_immutables(&self, unchecked: &mut Vec<u64>) -> Result<()> {
        let (imms, next_wal) = {
            let state = self.versions.load();
            if state.imms.is_empty() {
                return Ok(());
            }
            // The active memtable owns the oldest WAL that must survive:
            // every immutable one is flushed here.
            (state.imms.clone(), state.mem.wal_number())
        };
        let start = Instant::now();
        let drained: usize = imms.iter().map(|m| m.approximate_bytes()).sum();
        let mems: Vec<&Memtable> = imms.iter().map(AsRef::as_ref).collect();
        let flushed = self.write_memtable(&mems)?;
        let bytes: u64 = flushed.files.iter().map(|(_, f)| f.size).sum::<u64>()
            + flushed.blob.as_ref().map_or(0, |b| b.size);
        let mut edit = VersionEdit { log_number: Some(next_wal), ..VersionEdit::default() };
        edit.last_seqno = imms.iter().map(|m| m.max_seqno()).max();
        edit.files_added = flushed.files.into_iter().map(|(tree, f)| (tree, 0, f)).collect();
        edit.blob_files_added.extend(flushed.blob);
        edit.range_tombstones_added = flushed.range_tombstones;
        let mut numbers: Vec<u64> = edit.files_added.iter().map(|(_, _, f)| f.number).collect();
        let ssts = numbers.len();
        numbers.extend(edit.blob_files_added.iter().map(|b| b.number));
        self.install(Memtables::Flushed(&imms), &numbers, |held| {
            // A table dropped while this flush ran takes its outputs with it
            // (they are collected as obsolete files).
            let current = held.current();
            edit.files_added.retain(|(tree, _, _)| current.tree(*tree).is_some());
            edit.range_tombstones_added.retain(|(tree, _)| current.tree(*tree).is_some());
            // A range tombstone over no older entry (a range of keys never
            // written, or written and flushed only after it) hides nothing.
            let (files_added, current_ref) = (&edit.files_added, &current);
            edit.range_tombstones_added.retain(|(tree, t)| {
                let Some(files) = current_ref.tree(*tree) else { return false };
                // History lists each range delete as a delete of its keys.
                if current_ref.catalog.history(*tree).is_some() {
                    return true;
                }
                let mine = files_added.iter().filter(|(id, _, _)| id == tree).map(|(_, _, f)| f);
                files
                    .all_files()
                    .map(|(_, f)| f.as_ref())
                    .chain(mine)
                    .any(|f| f.min_seqno < t.seqno && t.meets_span(&f.smallest.user_key, &f.largest.user_key))
            });
            // The times of the commits now durable in SSTs, while a tree
            // keeps history or has a time to live (the WAL that held them
            // may go).
            let catalog = current.catalog.clone();
            let through = edit.last_seqno.unwrap_or(0);
            (edit.commit_times_after, edit.commit_times) = self.commit_times_to_log(&catalog, through);
            if !catalog.any_timed() && held.has_commit_times() {
                // History was turned off: the marks go from the MANIFEST
                // too, or a reopen would time later commits by them.
                edit.commit_times_cleared = true;
                edit.commit_times_after = through;
            }
            if let Some(ms) = self.commit_times_kept_from(&catalog) {
                held.forget_commit_times_before(ms);
            }
            Ok(Some(edit))
        })?;
        self.counters.record_flush(bytes, start.elapsed());
        self.jobs.record_drain(drained, start.elapsed());
        unchecked.extend_from_slice(&numbers[..ssts]);
        if !self.versions.load().imms.is_empty() {
            let over = unchecked.len().saturating_sub(UNCHECKED_SSTS_MAX);
            unchecked.drain(..over);
            self.jobs.wake();
            return Ok(());
        }
        self.check_new_ssts(unchecked);
        unchecked.clear();
        // Collect before waking waiters (as after a compaction).
        let collected = self.delete_obsolete_files(false);
        self.jobs.wake();
        collected
    }

    /// Writes one L0 SST per tree the memtables hold (their entries
    /// merged), and the values of keyspaces at or above
    /// `blob_value_bytes_min` to one blob file; syncs the files and the
    /// directory, so the MANIFEST may reference them.
    pub(crate) fn write_memtable(&self, mems: &[&Memtable]) -> Result<Flushed> {
        let mut flushed = Flushed::default();
        let mut current: Option<(TreeId, u64, SstWriter)> = None;
        let mut blobs: Option<BlobWriter> = None;
        let mut pointer = Vec::new();
        // The version set's current version, not the installed one: during
        // recovery nothing is installed yet.
        let catalog = self.versions.current().catalog.clone();
        let blob_min = self.opts.blob_value_bytes_min;
        // Entries come tree by tree: the catalog is asked once per tree
        // whether it is live and whether its values may go to a blob file.
        let mut tree_state: Option<(TreeId, bool, bool)> = None;
        for key in Memtable::merged_entries(mems) {
            let (is_live, separates) = match tree_state {
                Some((tree, is_live, separates)) if tree == key.tree => (is_live, separates),
                _ => {
                    let def = catalog.tree(key.tree);
                    // A merge keyspace keeps its values inline: compaction
                    // folds operands onto them.
                    let separates = blob_min > 0
                        && def.is_some_and(|d| {
                            matches!(d.kind, TreeKind::Keyspace) && d.merge_operator.is_none()
                        });
                    tree_state = Some((key.tree, def.is_some(), separates));
                    (def.is_some(), separates)
                }
            };
            if !is_live {
                // The tree was dropped: its rows go nowhere.
                continue;
            }
            if current.as_ref().is_none_or(|(tree, _, _)| *tree != key.tree) {
                if let Some(done) = current.take() {
                    flushed.files.push(finish_sst(done)?);
                }
                current = Some(self.start_sst(key.tree, catalog.table_layout(key.tree), false)?);
            }
            let Some((_, _, writer)) = current.as_mut() else { continue };
            if separates
                && key.value.len() >= blob_min
                && let Some((seqno, Kind::Put)) = unpack_trailer(key.trailer)
            {
                let blob = match &mut blobs {
                    Some(b) => b,
                    None => blobs.insert(self.start_blob_file()?),
                };
                pointer.clear();
                blob.add(key.value)?.encode_to(&mut pointer);
                writer.add(key.user_key, pack_trailer(seqno, Kind::Blob), &pointer)?;
            } else {
                writer.add(key.user_key, key.trailer, key.value)?;
            }
        }
        if let Some(done) = current.take() {
            flushed.files.push(finish_sst(done)?);
        }
        if let Some(blob) = blobs {
            flushed.blob = Some(finish_blob_file(blob)?);
        }
        // Range tombstones go to the version as they are: the MANIFEST
        // record that adds the files names them too.
        flushed.range_tombstones = mems
            .iter()
            .flat_map(|m| m.all_range_tombstones())
            .filter(|(tree, _)| catalog.tree(*tree).is_some())
            .collect();
        if !flushed.files.is_empty() || flushed.blob.is_some() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(flushed)
    }

    /// Starts a blob file; its number stays in use (safe from the
    /// collection) until the caller releases it.
    pub(crate) fn start_blob_file(&self) -> Result<BlobWriter> {
        let number = self.versions.new_file_number_held(&self.files);
        let file = self.fs.create(&self.dir.join(files::blob(number)))?;
        Ok(BlobWriter::new(file, number))
    }

    /// Starts an SST of `tree` whose rows have `layout` (a table's; `None`
    /// for a keyspace). The caller passes the layout it read its input
    /// with: the catalog may have changed since (a drop while a compaction
    /// runs), and rows must be written as they were read. `settles`: the
    /// file goes where the tree's rows settle (a bottommost compaction, a
    /// bulk load), so a table's blocks take `settled_compression` and
    /// `settled_block_bytes_target`.
    pub(crate) fn start_sst(
        &self,
        tree: TreeId,
        layout: Option<Arc<TableLayout>>,
        settles: bool,
    ) -> Result<(TreeId, u64, SstWriter)> {
        let number = self.versions.new_file_number_held(&self.files);
        let path = self.dir.join(files::sst(number));
        let file = Box::new(WritebackEvery::new(self.fs.create(&path)?, SST_WRITEBACK_BYTES));
        let options = self.sst_writer_options(tree, layout, settles, number);
        Ok((tree, number, SstWriter::new(file, path, &options)))
    }

    /// How an SST of `tree` is written (see [`DbInner::start_sst`]); it
    /// records `number` as its file number.
    pub(crate) fn sst_writer_options(
        &self,
        tree: TreeId,
        layout: Option<Arc<TableLayout>>,
        settles: bool,
        number: u64,
    ) -> SstWriterOptions {
        let (mut compression, key_prefixes) = self.index_traits_of(tree);
        let settled_table = settles && layout.is_some();
        if settled_table {
            compression = self.opts.settled_compression;
        }
        SstWriterOptions {
            block_bytes_target: match &layout {
                Some(_) if settled_table => self.opts.settled_block_bytes_target,
                Some(_) => self.opts.table_block_bytes_target,
                None => self.opts.block_bytes_target,
            },
            bloom_bits_per_key: self.opts.bloom_bits_per_key,
            compression,
            tree_id: tree,
            layout,
            learned_index_epsilon: self.opts.learned_index.then_some(self.opts.learned_index_epsilon),
            file_number: number,
            pack_integers: self.opts.pack_integers,
            string_dictionaries: self.opts.string_dictionaries,
            key_prefixes,
        }
    }

    /// How the data blocks of `tree` are compressed, and the layout whose
    /// key prefixes its filter holds: `index_compression` and the index's
    /// layout for a secondary index (being built or not); `compression`
    /// and none for any other tree, and for one dropped while a
    /// compaction wrote it.
    fn index_traits_of(
        &self,
        tree: TreeId,
    ) -> (crate::options::Compression, Option<Arc<crate::row::index::IndexLayout>>) {
        let state = self.versions.load();
        match state.version.catalog.tree(tree).map(|t| &t.kind) {
            Some(TreeKind::Index(def)) => (self.opts.index_compression, Some(def.layout.clone())),
            _ => (self.opts.compression, None),
        }
    }
}

/// What a flush wrote: SSTs by tree, and the blob file of their separated
/// values.
#[derive(Debug, Default)]
pub(crate) struct Flushed {
    pub files: Vec<(TreeId, FileMeta)>,
    pub blob: Option<BlobFileMeta>,
    /// The memtables' range tombstones of live trees.
    pub range_tombstones: Vec<(TreeId, crate::range_del::RangeTombstone)>,
}

pub(crate) fn finish_blob_file(writer: BlobWriter) -> Result<BlobFileMeta> {
    let s = writer.finish()?;
    Ok(BlobFileMeta { number: s.number, size: s.size, records: s.records, value_bytes: s.value_bytes })
}

pub(crate) fn finish_sst((tree, number, writer): (TreeId, u64, SstWriter)) -> Result<(TreeId, FileMeta)> {
    let s = writer.finish()?;
    let meta = FileMeta {
        number,
        size: s.file_size,
        entries: s.entries,
        min_seqno: s.min_seqno,
        max_seqno: s.max_seqno,
        smallest: s.smallest,
        largest: s.largest,
        blob_refs: s.blob_refs,
        schema_version: s.schema_version,
        reader: ReaderSlot::default(),
        merged_reads: crate::version::edit::MergedReads::default(),
    };
    Ok((tree, meta))
}

impl DbInner {
    /// Deletes SSTs no live version references, WALs below the log number
    /// and MANIFESTs other than the live one; at open also temporary files.
    /// Checks the blocks of freshly installed SSTs for in-place reads
    /// ([`SstReader::check_blocks_in_place`]) while their pages are still
    /// in the page cache, so lookups find them checked. Only files of the
    /// current version, which is held meanwhile: a file already compacted
    /// away is skipped, and none is opened after its deletion. A damaged
    /// file is left for its lookups to report.
    ///
    /// [`SstReader::check_blocks_in_place`]: crate::sst::reader::SstReader::check_blocks_in_place
    pub(crate) fn check_new_ssts(&self, numbers: &[u64]) {
        if !self.opts.mmap_reads {
            return;
        }
        let sv = self.versions.load_full();
        let files = sv.version.trees.iter().flat_map(|(&tree, t)| t.all_files().map(move |(_, f)| (tree, f)));
        for (tree, file) in files.filter(|(_, f)| numbers.contains(&f.number)) {
            if let Ok(reader) = self.sst_readers.reader(tree, file) {
                let _ = reader.check_blocks_in_place();
            }
        }
    }

    /// Switches the memtable and waits until every memtable is flushed.
    pub(crate) fn flush_all(&self) -> Result<()> {
        self.check_writable()?;
        self.with_exclusive_writer(|| self.switch_memtable())?;
        self.wait_for_imms_flushed()
    }

    /// Waits until the flush thread has written every immutable memtable.
    pub(crate) fn wait_for_imms_flushed(&self) -> Result<()> {
        self.jobs.wait_while(None, || !self.versions.load().imms.is_empty()).map_err(Interrupted::into_error)
    }
}
