//! Bulk loads: a table's rows written straight into SSTs and installed by
//! one MANIFEST edit, past the WAL and the memtable (RocksDB's
//! `IngestExternalFile`, with the files built by the engine itself).
//!
//! Loaded rows get seqnos newer than anything the database holds (one per
//! sorted run of batches), so the load replaces rows with the same key as
//! a write would. Memtables are flushed first: point lookups stop at the
//! first source that holds a key (a memtable row older than the load would
//! win), and recovery takes the MANIFEST's `last_seqno`, which the load
//! raises, as the end of what was flushed. A load in key order lands in
//! the deepest level whose every level above holds nothing in its key
//! range — the bottom level for a fresh table, so compaction never
//! rewrites it; a load of several overlapping runs lands in L0.

use std::sync::Arc;

use arrow_array::RecordBatch;

use crate::catalog::TreeKind;
use crate::codec::internal::{Kind, SEQNO_MAX, pack_trailer};
use crate::db::jobs::flush::finish_sst;
use crate::db::read::cursor::file_overlaps;
use crate::db::state::inner::DbInner;
use crate::db::state::versions::Memtables;
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::{self, layout::TableLayout};
use crate::sst::writer::SstWriter;
use crate::version::edit::{FileMeta, VersionEdit};
use crate::version::version::LEVELS;

/// What [`Table::bulk_load`](crate::Table::bulk_load) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkLoad {
    /// Rows installed: one per key of each sorted run (a key twice in a
    /// batch counts once; a key in several runs, once per run).
    pub rows: u64,
    /// SSTs written.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// The level they went to (0 when no level below could take them).
    pub level: usize,
    /// Sorted runs the batches made (1 when they came in key order); a
    /// load of several is compacted into the levels before it returns.
    pub runs: u64,
}

/// The files of a load (or an index build) under way: until they are
/// installed, dropping this gives their numbers back so the collector
/// deletes them.
pub(crate) struct Pending<'a> {
    inner: &'a DbInner,
    pub(crate) numbers: Vec<u64>,
    pub(crate) installed: bool,
}

impl<'a> Pending<'a> {
    pub(crate) fn new(inner: &'a DbInner) -> Pending<'a> {
        Pending { inner, numbers: Vec::new(), installed: false }
    }
}

/// The caller's source, pulled with its panics caught: a panic there must
/// not be taken for one of the engine's while it owns the write path
/// (which stops all writes). The first panic ends the source; the load
/// fails and raises it again after giving the write path back.
struct CaughtSource<'a, 'b> {
    batches: &'a mut dyn Iterator<Item = Result<RecordBatch>>,
    panic: &'b mut Option<Box<dyn std::any::Any + Send>>,
}

impl Iterator for CaughtSource<'_, '_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        if self.panic.is_some() {
            return None;
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.batches.next())) {
            Ok(next) => next,
            Err(payload) => {
                *self.panic = Some(payload);
                Some(Err(Error::InvalidArgument("the bulk_load source panicked".into())))
            }
        }
    }
}

/// Where a load's files are made.
#[derive(Clone, Copy)]
pub(crate) enum FileHome<'a> {
    /// The database's directory: numbered SSTs the load installs (their
    /// numbers kept in its [`Pending`]).
    Db,
    /// A directory outside any database (`Table::write_sst_files`).
    External(&'a files::ExternalDir),
}

/// Where a load's rows go: the SST being written, the files done, the
/// current run's seqno and the largest key written so far. With cut
/// points, no file holds keys on both sides of one: a file ends before
/// the first key at or above `cuts[limit]`.
struct RunWriter<'a, 'p> {
    inner: &'a DbInner,
    tree: TreeId,
    layout: &'a Arc<TableLayout>,
    home: FileHome<'a>,
    cuts: &'a [Vec<u8>],
    limit: Option<usize>,
    seqno: u64,
    outputs: Vec<FileMeta>,
    current: Option<(TreeId, u64, SstWriter)>,
    last_key: Option<Vec<u8>>,
    pending: &'a mut Pending<'p>,
}

impl RunWriter<'_, '_> {
    /// Whether `key` sorts above every key written (or none was).
    fn is_above_all(&self, key: &[u8]) -> bool {
        self.last_key.as_deref().is_none_or(|last| key > last)
    }

    /// Goes on with the current run if `first` sorts above everything
    /// written, else starts a new one at the next seqno (its files may
    /// overlap the earlier runs').
    fn continue_or_start_run(&mut self, first: &[u8]) -> Result<()> {
        if self.is_above_all(first) {
            return Ok(());
        }
        self.finish_file()?;
        self.seqno += 1;
        if self.seqno > SEQNO_MAX {
            return Err(Error::InvalidArgument("sequence numbers exhausted".into()));
        }
        Ok(())
    }

    /// Writes rows given in strictly increasing key order, each as
    /// `(key, encoder of its batch, row)`: into the current run when the
    /// first sorts above everything written, else into a new run.
    fn write_sorted<'k, 'e, 'b: 'e>(
        &mut self,
        rows: impl IntoIterator<Item = (&'k [u8], &'e row::encode::RowEncoder<'b>, usize)>,
    ) -> Result<()> {
        let mut rows = rows.into_iter().peekable();
        let Some(&(first, _, _)) = rows.peek() else { return Ok(()) };
        self.continue_or_start_run(first)?;
        let trailer = pack_trailer(self.seqno, Kind::Put);
        let mut last: &[u8] = first;
        for (key, encoder, row) in rows {
            let full = self
                .current
                .as_ref()
                .is_some_and(|(_, _, w)| w.estimated_file_bytes() >= self.inner.opts.sst_bytes());
            if full || self.limit.is_some_and(|c| key >= self.cuts[c].as_slice()) {
                self.finish_file()?;
            }
            if self.current.is_none() {
                self.start_file(key)?;
            }
            if let Some((_, _, writer)) = self.current.as_mut() {
                // Straight from the batch's arrays into the block's
                // columns: no row encoding and decoding on the way.
                writer.add_encoded_row(key, trailer, encoder, row)?;
            }
            last = key;
        }
        self.last_key = Some(last.to_vec());
        Ok(())
    }

    /// Sorts the rows of the held batches together (of two rows with one
    /// key, the later batch's stays) and writes them as one run. The rows
    /// are sorted by a 16-byte head of their key (the bytes compared only
    /// on a tie), then gathered into batches in key order a chunk at a
    /// time by Arrow's `interleave`, column by column: taken row by row
    /// from the held batches, each value's copy waited on a cache miss
    /// (13% of a 3M-row load of rows in random order).
    fn write_held(&mut self, held: &[(RecordBatch, BatchKeys)]) -> Result<()> {
        /// Rows gathered into one batch at a time (fewer under the
        /// `testing` feature, so that tests cross chunks).
        const GATHER_ROWS: usize = if cfg!(feature = "testing") { 61 } else { 16 * 1024 };
        /// Below this many rows one thread writes the run.
        const SPLIT_ROWS_MIN: usize = if cfg!(feature = "testing") { 100 } else { 128 * 1024 };
        if held.is_empty() {
            return Ok(());
        }
        let key = |e: &HeldRow| held[e.batch as usize].1.key(e.row as usize);
        let mut order: Vec<HeldRow> = held
            .iter()
            .enumerate()
            .flat_map(|(b, (_, keys))| {
                keys.order.iter().map(move |&r| HeldRow {
                    head: key_head(keys.key(r)),
                    batch: b as u32,
                    row: r as u32,
                })
            })
            .collect();
        // Of rows with one key (from different batches: a batch's keys are
        // distinct), the later batch's comes last.
        order.sort_unstable_by(|x, y| {
            x.head.cmp(&y.head).then_with(|| key(x).cmp(key(y))).then_with(|| x.batch.cmp(&y.batch))
        });
        let mut kept: Vec<HeldRow> = Vec::with_capacity(order.len());
        for entry in order {
            match kept.last_mut() {
                // Heads first: reading the keys is a cache miss each.
                Some(last) if last.head == entry.head && key(last) == key(&entry) => *last = entry,
                _ => kept.push(entry),
            }
        }
        // The table's schema, and each array as its column's type: held
        // batches may differ in what `check_batch` lets through (a field's
        // nullability, a timestamp zone of "" or none), which `interleave`
        // and `RecordBatch::try_new` would refuse.
        let schema = self.layout.schema().clone();
        let cast: Vec<Vec<arrow_array::ArrayRef>> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(c, field)| {
                held.iter()
                    .map(|(batch, _)| match batch.column(c) {
                        a if a.data_type() == field.data_type() => Ok(a.clone()),
                        a => arrow_cast::cast(a, field.data_type()),
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()
            })
            .collect::<std::result::Result<_, _>>()?;
        let columns: Vec<Vec<&dyn arrow_array::Array>> =
            cast.iter().map(|arrays| arrays.iter().map(AsRef::as_ref).collect()).collect();
        let held_rows = HeldRows { held, columns, schema, gather_rows: GATHER_ROWS };
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        if threads == 1 || kept.len() < SPLIT_ROWS_MIN {
            return held_rows.write(self, &kept);
        }
        // The run in two halves by key, each gathered and written as files
        // of its own on a thread of its own (the files of a run never
        // overlap). The run's seqno is chosen first: the upper half's
        // writer then starts above everything, as the lower half's does.
        let (lower, upper) = kept.split_at(kept.len() / 2);
        self.continue_or_start_run(key(&lower[0]))?;
        self.last_key = None;
        let mut upper_pending = Pending::new(self.inner);
        let mut upper_writer = RunWriter {
            inner: self.inner,
            tree: self.tree,
            layout: self.layout,
            home: self.home,
            cuts: self.cuts,
            limit: None,
            seqno: self.seqno,
            outputs: Vec::new(),
            current: None,
            last_key: None,
            pending: &mut upper_pending,
        };
        let (lower_written, upper_written) = std::thread::scope(|s| {
            let upper_thread = s.spawn(|| held_rows.write(&mut upper_writer, upper));
            let lower_written = held_rows.write(self, lower);
            let upper_written = upper_thread
                .join()
                .unwrap_or_else(|_| Err(Error::InvalidArgument("a bulk load thread panicked".into())));
            (lower_written, upper_written)
        });
        // Every file the upper half started is the load's to delete if it
        // fails, whichever half failed.
        let RunWriter { outputs, current, last_key, limit, .. } = upper_writer;
        self.pending.numbers.append(&mut upper_pending.numbers);
        lower_written?;
        upper_written?;
        // The lower half's last file is done; the upper half's stays open
        // for the rows that come next, above all of them.
        self.finish_file()?;
        self.outputs.extend(outputs);
        self.current = current;
        self.last_key = last_key;
        self.limit = limit;
        Ok(())
    }

    /// Starts a file whose first key is `first`.
    fn start_file(&mut self, first: &[u8]) -> Result<()> {
        let started = match self.home {
            // Bulk-loaded rows go to the deepest level free in their range:
            // where rows settle.
            FileHome::Db => {
                let started = self.inner.start_sst(self.tree, Some(self.layout.clone()), true)?;
                self.pending.numbers.push(started.1);
                started
            }
            FileHome::External(dir) => dir.start(self.inner, self.tree, self.layout)?,
        };
        let next_cut = self.cuts.partition_point(|c| c.as_slice() <= first);
        self.limit = (next_cut < self.cuts.len()).then_some(next_cut);
        self.current = Some(started);
        Ok(())
    }

    /// Finishes the SST being written, if any.
    fn finish_file(&mut self) -> Result<()> {
        self.outputs.extend(self.current.take().map(finish_sst).transpose()?.map(|(_, f)| f));
        self.limit = None;
        Ok(())
    }
}

/// The held batches of a run, their columns cast to the table's types,
/// ready to be gathered into key order a chunk at a time.
struct HeldRows<'h> {
    held: &'h [(RecordBatch, BatchKeys)],
    columns: Vec<Vec<&'h dyn arrow_array::Array>>,
    schema: arrow_schema::SchemaRef,
    gather_rows: usize,
}

impl HeldRows<'_> {
    /// Gathers `rows` (in key order) into batches by Arrow's `interleave`
    /// and writes them through `writer`.
    fn write(&self, writer: &mut RunWriter<'_, '_>, rows: &[HeldRow]) -> Result<()> {
        let key = |e: &HeldRow| self.held[e.batch as usize].1.key(e.row as usize);
        let (mut keys, mut ends) = (Vec::new(), Vec::with_capacity(self.gather_rows.min(rows.len())));
        for chunk in rows.chunks(self.gather_rows) {
            let at: Vec<(usize, usize)> = chunk.iter().map(|e| (e.batch as usize, e.row as usize)).collect();
            let arrays = self
                .columns
                .iter()
                .map(|arrays| arrow_select::interleave::interleave(arrays, &at))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let batch = RecordBatch::try_new(self.schema.clone(), arrays)?;
            let encoder = row::encode::RowEncoder::new(writer.layout, &batch)?;
            // The chunk's keys in order in one buffer, as its values are.
            keys.clear();
            ends.clear();
            for e in chunk {
                keys.extend_from_slice(key(e));
                ends.push(keys.len());
            }
            let key_at = |i: usize| &keys[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
            writer.write_sorted((0..chunk.len()).map(|i| (key_at(i), &encoder, i)))?;
        }
        Ok(())
    }
}

/// A held row in the sort of a run: its key's first 16 bytes (big-endian,
/// zero padded) and where it is.
struct HeldRow {
    head: u128,
    batch: u32,
    row: u32,
}

/// The first 16 bytes of a key as a number that orders as the bytes do
/// (zero padded: a shorter key that is a prefix of a longer one ties, and
/// the bytes decide).
pub(crate) fn key_head(key: &[u8]) -> u128 {
    let mut head = [0u8; 16];
    let n = key.len().min(16);
    head[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(head)
}

/// The encoded keys of one batch and the order to load its rows in.
struct BatchKeys {
    /// Every row's key, one after another.
    bytes: Vec<u8>,
    /// Where row `r`'s key ends in `bytes`.
    ends: Vec<usize>,
    /// Rows in key order, one per distinct key.
    order: Vec<usize>,
}

impl BatchKeys {
    /// The key of row `r`.
    fn key(&self, r: usize) -> &[u8] {
        let start = if r == 0 { 0 } else { self.ends[r - 1] };
        &self.bytes[start..self.ends[r]]
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.installed || self.numbers.is_empty() {
            return;
        }
        {
            self.inner.files.release(&self.numbers);
        }
        // Best effort: what is left is collected at the next flush,
        // compaction or open.
        let _ = self.inner.delete_obsolete_files(false);
    }
}

impl DbInner {
    /// Loads `batches` into table `tree` (rows of `layout`); see
    /// [`Table::bulk_load`](crate::Table::bulk_load).
    pub(crate) fn bulk_load(
        &self,
        tree: TreeId,
        layout: &Arc<TableLayout>,
        batches: &mut dyn Iterator<Item = Result<RecordBatch>>,
    ) -> Result<BulkLoad> {
        self.check_writable()?;
        // Outside the writer right: its drop may run a collection, which
        // comes before the writer right in the lock order.
        let mut pending = Pending::new(self);
        let mut source_panic = None;
        let result = self.with_exclusive_writer(|| {
            // Checked again now that no write, DDL or close can run: a
            // close, an index created, or the table dropped while this
            // load waited for the write path.
            self.check_writable()?;
            self.check_loadable(tree, layout, "bulk_load")?;
            self.flush_everything()?;
            let seqno = self.writer.last_seqno() + 1;
            if seqno > SEQNO_MAX {
                return Err(Error::InvalidArgument("sequence numbers exhausted".into()));
            }
            let mut source = CaughtSource { batches, panic: &mut source_panic };
            let (outputs, seqno) = self.write_loaded_ssts(
                (tree, layout),
                &mut source,
                seqno,
                (FileHome::Db, &[]),
                &mut pending,
            )?;
            if outputs.is_empty() {
                return Ok(BulkLoad::default());
            }
            self.fs.sync_dir(&self.dir)?;
            // The one exception to the lock order: the compaction lock taken
            // while owning the writer right, and only to place and install
            // the files (no compaction may move files into their range
            // between the choice of level and the edit). Safe because no
            // holder of the compaction lock waits for the writer right
            // (`compact_range` flushes before it takes the lock); taken the
            // other way round, a load waited for a group leader that waited,
            // stalled on L0, for the compaction the load held off.
            let _no_compaction = self.jobs.compaction_slot();
            let runs = seqno - outputs.iter().map(|f| f.min_seqno).min().unwrap_or(seqno) + 1;
            self.install_pending(tree, outputs, runs, Some(seqno), &mut pending)
        });
        drop(pending);
        if let Some(payload) = source_panic {
            // The caller's own panic, raised again once the write path is
            // given back (nothing was installed).
            std::panic::resume_unwind(payload);
        }
        let load = result?;
        if load.runs > 1 {
            // Several runs went to L0, at least a file each: every point
            // read would probe them all and writers would stall on the L0
            // count until compaction caught up. Merge them down now, as
            // the write path's compactions would have.
            let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
            self.compact_range(tree, &all)?;
        }
        Ok(load)
    }

    /// Refuses a tree that is not a live table without indexes: a
    /// keyspace's table face stores key-value blocks, and an index would
    /// miss the loaded rows. A table whose columns changed since the
    /// caller took `layout` is refused too: its rows would be written
    /// under the previous schema version.
    fn check_loadable(&self, tree: TreeId, layout: &TableLayout, what: &str) -> Result<()> {
        let catalog = self.versions.load().version.catalog.clone();
        match catalog.tree(tree).map(|t| (&t.kind, t.name.as_str())) {
            Some((TreeKind::Table(_), name)) => {
                if catalog.table_layout(tree).is_some_and(|now| now.version() != layout.version()) {
                    return Err(Error::Conflict(format!(
                        "the columns of table {name} changed while the {what} waited for the write path; load again"
                    )));
                }
            }
            Some(_) => {
                return Err(Error::InvalidArgument(format!(
                    "{what} takes a table's rows; a keyspace's table face is written with Table::write or Db::write"
                )));
            }
            None => return Err(Error::InvalidArgument(format!("{what} into a table that was dropped"))),
        }
        if catalog.indexes_of(tree).next().is_some() {
            return Err(Error::InvalidArgument(format!(
                "{what} into a table with secondary indexes: load the rows first, then create the indexes"
            )));
        }
        if catalog.tree(tree).is_some_and(|t| t.history.is_some()) {
            // Loaded rows bypass the WAL: the change feed would never see
            // them, and their versions share one seqno per run.
            return Err(Error::InvalidArgument(format!(
                "{what} into a table keeping history: load the rows first, then set the history window"
            )));
        }
        Ok(())
    }

    /// Flushes every memtable, not only those holding rows of the table:
    /// recovery skips WAL records at or below the MANIFEST's `last_seqno`
    /// as flushed, and the load's edit raises it past every write so far,
    /// so an unflushed write of any tree would be lost on reopen (the
    /// differential test found exactly that). The caller owns the write
    /// path, so no new rows arrive meanwhile.
    fn flush_everything(&self) -> Result<()> {
        self.switch_memtable()?;
        self.wait_for_imms_flushed()
    }

    /// Encodes, sorts and writes the rows into new SSTs of `tree`, each
    /// cut at `Options::sst_bytes`. A batch whose smallest key is above
    /// everything written so far (a batch itself is sorted here) goes
    /// straight to the files: input in key order streams through as one
    /// sorted run at `first_seqno`. A batch that breaks the order is held,
    /// with the ones after it, until `Options::memtable_bytes_max` of them
    /// are in memory; their rows are then sorted together and written as
    /// one run, a new one (one seqno higher, so where runs share a key the
    /// later batch's row wins, as in writes) unless it sorts above
    /// everything written. With `home` external the files are made there
    /// instead, each within one of the ranges `cuts` (ascending encoded
    /// keys) makes. Returns the files and the last seqno used.
    fn write_loaded_ssts(
        &self,
        (tree, layout): (TreeId, &Arc<TableLayout>),
        batches: &mut dyn Iterator<Item = Result<RecordBatch>>,
        first_seqno: u64,
        (home, cuts): (FileHome<'_>, &[Vec<u8>]),
        pending: &mut Pending<'_>,
    ) -> Result<(Vec<FileMeta>, u64)> {
        let budget = self.opts.memtable_bytes_max;
        let mut runs = RunWriter {
            inner: self,
            tree,
            layout,
            home,
            cuts,
            limit: None,
            seqno: first_seqno,
            outputs: Vec::new(),
            current: None,
            last_key: None,
            pending,
        };
        let mut held: Vec<(RecordBatch, BatchKeys)> = Vec::new();
        let mut held_bytes = 0;
        for batch in batches {
            let batch = batch?;
            layout.check_batch(&batch)?;
            let encoder = row::encode::RowEncoder::new(layout, &batch)?;
            let keys = self.sorted_keys(&encoder, batch.num_rows())?;
            let Some(&first) = keys.order.first() else { continue };
            if held.is_empty() && runs.is_above_all(keys.key(first)) {
                runs.write_sorted(keys.order.iter().map(|&r| (keys.key(r), &encoder, r)))?;
                continue;
            }
            held_bytes += batch.get_array_memory_size() + keys.bytes.len();
            held.push((batch, keys));
            if held_bytes >= budget {
                runs.write_held(&held)?;
                held.clear();
                held_bytes = 0;
            }
        }
        runs.write_held(&held)?;
        runs.finish_file()?;
        Ok((runs.outputs, runs.seqno))
    }

    /// A batch's keys, and its rows in key order; of two rows with one key
    /// the later stays (as in a write). Rows over the size limits are
    /// refused as a write refuses them.
    fn sorted_keys(&self, encoder: &row::encode::RowEncoder<'_>, n: usize) -> Result<BatchKeys> {
        let mut keys =
            BatchKeys { bytes: Vec::new(), ends: Vec::with_capacity(n), order: Vec::with_capacity(n) };
        // Most batches are far below the limit as a whole: then no row's
        // length needs finding.
        let rows_fit = encoder.rows_len_bound(n) <= self.opts.value_bytes_max;
        for r in 0..n {
            let start = keys.bytes.len();
            encoder.key(r, &mut keys.bytes);
            keys.ends.push(keys.bytes.len());
            let key_len = keys.bytes.len() - start;
            if key_len > self.opts.key_bytes_max
                || (!rows_fit && encoder.row_len(r) > self.opts.value_bytes_max)
            {
                let row_len = encoder.row_len(r);
                return Err(Error::InvalidArgument(format!(
                    "row {r} encodes to a {key_len}-byte key and {row_len} bytes, over key_bytes_max ({}) or \
                     value_bytes_max ({})",
                    self.opts.key_bytes_max, self.opts.value_bytes_max
                )));
            }
        }
        keys.order.extend(0..n);
        // Batches often come sorted: then there is nothing to do.
        if (1..n).all(|r| keys.key(r - 1) < keys.key(r)) {
            return Ok(keys);
        }
        // Stable: rows with one key keep their order, and the last stays.
        let mut order = std::mem::take(&mut keys.order);
        order.sort_by(|&a, &b| keys.key(a).cmp(keys.key(b)));
        let mut kept: Vec<usize> = Vec::with_capacity(n);
        for r in order {
            match kept.last_mut() {
                Some(last) if keys.key(*last) == keys.key(r) => *last = r,
                _ => kept.push(r),
            }
        }
        keys.order = kept;
        Ok(keys)
    }

    /// Installs the files of `pending` (`outputs`, making `runs` sorted
    /// runs) and wakes the background jobs; see [`DbInner::install_loaded`].
    /// On a failed MANIFEST write that stopped writes the files stay, as
    /// the MANIFEST may name them after all (the next open collects them
    /// if it does not).
    pub(crate) fn install_pending(
        &self,
        tree: TreeId,
        outputs: Vec<FileMeta>,
        runs: u64,
        last_seqno: Option<u64>,
        pending: &mut Pending<'_>,
    ) -> Result<BulkLoad> {
        let load = self.install_loaded(tree, outputs, runs, last_seqno).inspect_err(|_| {
            if self.check_writable().is_err() {
                pending.installed = true;
            }
        })?;
        pending.installed = true;
        self.check_new_ssts(&pending.numbers);
        self.jobs.wake();
        Ok(load)
    }

    /// Installs loaded files, making `runs` sorted runs, in one MANIFEST
    /// edit. With `last_seqno` (a load's rows, newer than every write) the
    /// edit raises the MANIFEST's last seqno to it and publishes it; an
    /// index build's entries carry an older seqno and raise nothing. One
    /// sorted run goes to the deepest level whose levels above (and
    /// itself) hold nothing in its key range; several runs, which may
    /// overlap one another, go to L0 (newest run first, by seqno), where
    /// compaction merges them. The caller owns the write path and the
    /// compaction lock.
    fn install_loaded(
        &self,
        tree: TreeId,
        outputs: Vec<FileMeta>,
        runs: u64,
        last_seqno: Option<u64>,
    ) -> Result<BulkLoad> {
        let one_run = runs == 1;
        let lo = outputs.iter().map(|f| f.smallest.user_key.as_ref()).min();
        let hi = outputs.iter().map(|f| f.largest.user_key.as_ref()).max();
        let range = match (lo, hi) {
            (Some(lo), Some(hi)) => {
                (std::ops::Bound::Included(lo.to_vec()), std::ops::Bound::Included(hi.to_vec()))
            }
            _ => return Ok(BulkLoad::default()),
        };
        let numbers: Vec<u64> = outputs.iter().map(|f| f.number).collect();
        let mut load = BulkLoad {
            runs,
            rows: outputs.iter().map(|f| f.entries).sum(),
            files: outputs.len(),
            bytes: outputs.iter().map(|f| f.size).sum(),
            level: 0,
        };
        self.install(Memtables::Keep, &numbers, |held| {
            let Some(levels) = held.current().tree(tree).map(|t| &t.levels) else {
                return Err(Error::InvalidArgument("the table was dropped during its bulk load".into()));
            };
            let free = |l: usize| !levels[l].iter().any(|f| file_overlaps(f, &range));
            if one_run {
                load.level = (0..LEVELS).take_while(|&l| free(l)).last().unwrap_or(0);
            }
            let mut edit = VersionEdit {
                last_seqno,
                files_added: outputs.into_iter().map(|f| (tree, load.level, f)).collect(),
                ..VersionEdit::default()
            };
            // The rows are committed now, as a write's would be: timed
            // (before they are visible), so a time to live expires them,
            // with the mark logged where marks are kept.
            if let Some(seqno) = last_seqno {
                self.clock.record(seqno, self.clock.now_ms());
                let catalog = held.current().catalog.clone();
                if catalog.any_timed() {
                    (edit.commit_times_after, edit.commit_times) = self.commit_times_to_log(&catalog, seqno);
                }
            }
            Ok(Some(edit))
        })?;
        if let Some(seqno) = last_seqno {
            self.writer.publish(seqno);
        }
        Ok(load)
    }
}

pub(crate) mod files;
#[cfg(test)]
mod tests;
