//! Creating an index while writes go on. The index tree is created first,
//! marked as being built: from then on every write keeps it (upkeep) and
//! notes the primary keys it touched. The rows as of that moment are then
//! read from a snapshot, their entries sorted in memory-bounded runs and
//! written straight into SSTs (as a bulk load writes rows), which one
//! MANIFEST edit installs under the exclusive writer. The entries carry
//! the snapshot's seqno (on a table with a time to live, their row
//! version's, so both expire together), older than any upkeep entry; in the same
//! exclusive section, a batch written through the WAL gives every row a
//! write touched since the snapshot its current entry and deletes its
//! snapshot one, so neither stale entries nor the order of seqnos across
//! levels can show through. A unique index is then checked by one pass
//! over its entries. A last MANIFEST edit marks the index built. A crash
//! before it leaves a building index, which the next open drops: creation
//! is all or nothing.

use std::ops::Bound;

use bytes::Bytes;

use super::options::IndexOptions;
use crate::catalog::{Namespace, TreeKind, TreeKindRecord};
use crate::codec::internal::{Kind, SeqNo, pack_trailer};
use crate::db::jobs::flush::finish_sst;
use crate::db::jobs::ingest::{Pending, key_head};
use crate::db::read::iter::{Direction, RangeReader};
use crate::db::{
    read::scan::ScanOptions, read::snapshot::Snapshot, state::handles::Table, state::inner::DbInner,
};
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::encode::RowEncoder;
use crate::row::index::{IndexEntry, IndexLayout, RowValues};
use crate::version::VersionEdit;
use crate::version::edit::FileMeta;
use crate::wal::batch::WriteBatch;

/// `Table::create_index`.
pub(crate) fn create(table: &Table, name: &str, columns: &[&str], opts: &IndexOptions) -> Result<()> {
    let inner = table.inner();
    Namespace::IndexesOf(table.tree()).check_name(name)?;
    inner.check_writable()?;
    let catalog = inner.versions.load().version.catalog.clone();
    if !matches!(catalog.tree(table.tree()).map(|t| &t.kind), Some(TreeKind::Table(_))) {
        return Err(Error::InvalidArgument(format!(
            "{} is not a table with a schema of its own; only tables have indexes",
            table.name()
        )));
    }
    let table_layout = table.layout();
    let schema = table_layout.schema();
    let column_index = |what: &str, c: &str| {
        schema.index_of(c).map_err(|_| {
            Error::InvalidArgument(format!("{what} column {c} is not in table {}", table.name()))
        })
    };
    let columns = columns.iter().map(|c| column_index("index", c)).collect::<Result<Vec<_>>>()?;
    let include = opts.include.iter().map(|c| column_index("included", c)).collect::<Result<Vec<_>>>()?;
    let layout = IndexLayout::new(table_layout.clone(), &columns, &include)?;
    let record = TreeKindRecord::Index {
        table: table.tree(),
        unique: opts.unique,
        building: true,
        columns: columns.clone(),
        include: include.clone(),
    };
    let (index, snapshot) = inner.with_exclusive_writer(|| -> Result<(TreeId, Snapshot)> {
        inner.check_writable()?;
        if inner.versions.load().version.tree(table.tree()).is_none() {
            return Err(Error::InvalidArgument(format!("table {} was dropped", table.name())));
        }
        // The columns were found by name in this version of the schema.
        if table.layout().version() != table_layout.version() {
            return Err(Error::Conflict(format!(
                "the columns of table {} changed while index {name} was being created; nothing was created",
                table.name()
            )));
        }
        let index = inner.log_create(Namespace::IndexesOf(table.tree()), name, record)?;
        inner.indexes.start(index);
        // Every write before this point is in the snapshot; every later
        // one sees the index and keeps it.
        Ok((index, Snapshot::new(inner.clone())))
    })?;
    // A panic in the backfill (on this thread, outside the writer right)
    // still drops the half-built index below, then goes on unwinding:
    // otherwise writes would keep noting the rows they touch for it.
    let backfilled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        backfill(table, index, name, opts.unique, &layout, &snapshot)
    }));
    let (backfilled, panicked) = match backfilled {
        Ok(result) => (result, None),
        Err(payload) => (Err(Error::InvalidArgument("an index build panicked".into())), Some(payload)),
    };
    let built = backfilled.and_then(|()| {
        inner.with_exclusive_writer(|| {
            inner.check_writable()?;
            // The backfill's entries were logged unsynced: they must be
            // durable before the MANIFEST says the index is whole, or a
            // power loss would leave a built index missing them.
            inner.writer.sync_wal().map_err(|e| inner.set_bg_error(e))?;
            let record = TreeKindRecord::Index {
                table: table.tree(),
                unique: opts.unique,
                building: false,
                columns,
                include,
            };
            // Ready before it is seen built: a reader whose snapshot is
            // older than the build's entries must not take it. (An index
            // not yet built is never asked; a failed build forgets it.)
            let ready = inner.writer.last_seqno();
            inner.indexes.set_ready(index, ready);
            // On a table keeping history, the index answers past points
            // from here on only.
            let history = inner.versions.load().version.catalog.tree(table.tree()).and_then(|t| t.history);
            let tree_histories = history
                .map(|h| vec![(index, Some(crate::catalog::TreeHistory { window: h.window, since: ready }))])
                .unwrap_or_default();
            inner.install_edit(VersionEdit {
                tree_kinds: vec![(index, record)],
                tree_histories,
                ..VersionEdit::default()
            })
        })
    });
    drop(snapshot);
    if let Err(e) = built {
        // Nothing of the index may stay; if even the drop fails, the next
        // open drops the building index.
        let _ = inner.drop_trees(|| {
            let still_there = inner.versions.load().version.tree(index).is_some();
            Ok(if still_there { vec![index] } else { Vec::new() })
        });
        // Only now: until the drop, writes keep noting the rows they touch.
        inner.indexes.end(index);
        inner.indexes.forget(index);
        if let Some(payload) = panicked {
            std::panic::resume_unwind(payload);
        }
        return Err(e);
    }
    inner.indexes.end(index);
    Ok(())
}

/// Writes the entries of the snapshot's rows into the index: sorted into
/// SSTs, installed, then brought up to date with the writes made since.
fn backfill(
    table: &Table,
    index: TreeId,
    name: &str,
    unique: bool,
    layout: &IndexLayout,
    snapshot: &Snapshot,
) -> Result<()> {
    let inner = table.inner();
    let mut pending = Pending::new(inner);
    let (outputs, runs) = write_sorted_runs(table, index, layout, snapshot, &mut pending)?;
    #[cfg(test)]
    before_install::run();
    if !outputs.is_empty() {
        // The files' names must be durable before the MANIFEST names them.
        inner.fs.sync_dir(&inner.dir)?;
    }
    let check_at = inner.with_exclusive_writer(|| -> Result<Option<Snapshot>> {
        inner.check_writable()?;
        let dropped =
            || Error::InvalidArgument(format!("index {name} was dropped while it was being created"));
        let sv = inner.versions.load_full();
        if sv.version.catalog.tree(index).is_none() {
            return Err(dropped());
        }
        if !outputs.is_empty() {
            // As a bulk load: the compaction lock only to choose the level
            // and install (see `DbInner::bulk_load` on the lock order).
            let _no_compaction = inner.jobs.compaction_slot();
            inner.install_pending(index, outputs, runs, None, &mut pending)?;
        }
        bring_touched_up_to_date(table, index, layout, snapshot)?;
        // Every later write checks its entries against the whole index.
        Ok(unique.then(|| Snapshot::new(inner.clone())))
    });
    drop(pending);
    let check_at = check_at?;
    if runs > 1 {
        // Several overlapping runs in L0: merged now, as a bulk load's are.
        inner.compact_range(index, &(Bound::Unbounded, Bound::Unbounded))?;
    }
    match check_at {
        Some(at) => check_unique(inner, index, name, layout, &at),
        None => Ok(()),
    }
}

/// One entry of a sorted run: its key's first 16 bytes (big-endian, zero
/// padded, so most comparisons never reach the bytes: 8 were too few for
/// an integer column, whose leading bytes are alike) and where its key and
/// value lie in the run's buffer.
struct RunEntry {
    head: u128,
    start: usize,
    key_len: u32,
    value_len: u32,
    /// The entry's seqno: the snapshot's, or on a table with a time to
    /// live its row version's (so the two expire together).
    seqno: SeqNo,
}

/// Entries gathered for one sorted run, in one buffer.
#[derive(Default)]
struct Run {
    bytes: Vec<u8>,
    entries: Vec<RunEntry>,
}

impl Run {
    fn key(&self, e: &RunEntry) -> &[u8] {
        &self.bytes[e.start..e.start + e.key_len as usize]
    }

    fn memory(&self) -> usize {
        self.bytes.len() + self.entries.len() * std::mem::size_of::<RunEntry>()
    }

    fn order(&self, a: &RunEntry, b: &RunEntry) -> std::cmp::Ordering {
        a.head.cmp(&b.head).then_with(|| self.key(a).cmp(self.key(b)))
    }
}

/// Reads the snapshot's rows, makes their entries (refusing one over the
/// key or value limits, as upkeep would), and writes them in sorted runs
/// into SSTs of `index`, each cut at `Options::sst_bytes`, every entry at
/// the snapshot's seqno (its row's on a table with a time to live). A run takes up to `Options::write_buffer_bytes_max`,
/// the memory the database may spend on buffered writes: a 3M-row index
/// of one integer column (about 50 bytes an entry here) fits in one run,
/// where two runs cost a merging compaction as long as sorting and writing
/// them (1.3 s of 2.4 s, measured). Returns the files and how many runs
/// they make.
fn write_sorted_runs(
    table: &Table,
    index: TreeId,
    layout: &IndexLayout,
    snapshot: &Snapshot,
    pending: &mut Pending<'_>,
) -> Result<(Vec<FileMeta>, u64)> {
    let inner = table.inner();
    let budget = inner.opts.write_buffer_bytes_max.max(1);
    let (mut outputs, mut runs) = (Vec::new(), 0);
    let mut run = Run::default();
    let mut pk = Vec::new();
    let name = inner.versions.load().version.catalog.tree(index).map(|t| t.name.clone()).unwrap_or_default();
    let table_layout = table.layout();
    // On a table with a time to live, each entry takes its row version's
    // seqno, read alongside the scan in the same key order: an entry at
    // the snapshot's would outlive its row (and, once the key is written
    // again, name a row whose values it no longer holds).
    let mut row_seqnos = if inner.versions.load().version.catalog.ttl(table.tree()).is_some() {
        let (seqno, sv) = inner.read_view(Some(snapshot.seqno()));
        let all = (Bound::Unbounded, Bound::Unbounded);
        Some(RangeReader::open(inner, &sv, seqno, table.tree(), all, Direction::Forward)?)
    } else {
        None
    };
    let mut next_row: Option<(Bytes, SeqNo)> = None;
    for batch in table.scan(ScanOptions::default().snapshot(Some(snapshot)))? {
        let batch = batch?;
        let encoder = RowEncoder::new(&table_layout, &batch)?;
        for r in 0..batch.num_rows() {
            pk.clear();
            encoder.key(r, &mut pk);
            let seqno = match row_seqnos.as_mut() {
                None => snapshot.seqno(),
                Some(rows) => match seqno_of_row(rows, &mut next_row, &pk)? {
                    Some(seqno) => seqno,
                    // Expired since the scan read it: no entry.
                    None => continue,
                },
            };
            let start = run.bytes.len();
            let shape = layout.entry_into(&pk, &RowValues::of_batch_row(&encoder, r), &mut run.bytes);
            inner.check_entry_limits(&name, shape.key_len, shape.value_len)?;
            // The limits are options a caller may raise past what a run's
            // entry records.
            let over = |_| Error::InvalidArgument(format!("an entry of index {name} takes over 4 GiB"));
            run.entries.push(RunEntry {
                head: key_head(&run.bytes[start..start + shape.key_len]),
                start,
                key_len: u32::try_from(shape.key_len).map_err(over)?,
                value_len: u32::try_from(shape.value_len).map_err(over)?,
                seqno,
            });
        }
        if run.memory() >= budget {
            outputs.extend(write_run(inner, index, std::mem::take(&mut run), pending)?);
            runs += 1;
        }
    }
    if !run.entries.is_empty() {
        outputs.extend(write_run(inner, index, run, pending)?);
        runs += 1;
    }
    Ok((outputs, runs))
}

/// The seqno of the row version of `pk` that `rows` (a reader of the
/// table's rows in key order, `next` the row it stands at) holds; `None`
/// when it holds none (the row expired after the scan read it).
fn seqno_of_row(
    rows: &mut RangeReader,
    next: &mut Option<(Bytes, SeqNo)>,
    pk: &[u8],
) -> Result<Option<SeqNo>> {
    loop {
        if next.is_none() {
            match rows.next_entry_with_seqno()? {
                Some((key, _, seqno)) => *next = Some((key, seqno)),
                None => return Ok(None),
            }
        }
        match next.as_ref().map(|(key, seqno)| (key.as_ref().cmp(pk), *seqno)) {
            Some((std::cmp::Ordering::Less, _)) => *next = None,
            Some((std::cmp::Ordering::Equal, seqno)) => return Ok(Some(seqno)),
            _ => return Ok(None),
        }
    }
}

/// Sorts the run's entries (every key is distinct: it ends with the row's
/// primary key) and writes them into new SSTs. Both steps are split among
/// the cores: halves sorted on two threads and merged, then contiguous
/// slices of the sorted entries written as files of their own at once
/// (the files of one run never overlap).
fn write_run(
    inner: &DbInner,
    index: TreeId,
    mut run: Run,
    pending: &mut Pending<'_>,
) -> Result<Vec<FileMeta>> {
    /// Below this many entries one thread does it all (fewer under the
    /// `testing` feature, so that tests of a few thousand rows split).
    const SPLIT_ENTRIES_MIN: usize = if cfg!(feature = "testing") { 512 } else { 64 * 1024 };
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut entries = std::mem::take(&mut run.entries);
    if threads == 1 || entries.len() < SPLIT_ENTRIES_MIN {
        entries.sort_unstable_by(|a, b| run.order(a, b));
    } else {
        let mut upper = entries.split_off(entries.len() / 2);
        std::thread::scope(|s| {
            s.spawn(|| upper.sort_unstable_by(|a, b| run.order(a, b)));
            entries.sort_unstable_by(|a, b| run.order(a, b));
        });
        entries = merge_sorted(&run, entries, upper);
    }
    let parts = if entries.len() < SPLIT_ENTRIES_MIN { 1 } else { threads };
    let slices: Vec<&[RunEntry]> = entries.chunks(entries.len().div_ceil(parts).max(1)).collect();
    // Each thread notes the numbers of the files it starts where they
    // outlive it, even if it panics: every file started is the build's to
    // delete if it fails.
    let mut numbers: Vec<Vec<u64>> = slices.iter().map(|_| Vec::new()).collect();
    let written: Vec<Result<Vec<FileMeta>>> = std::thread::scope(|s| {
        let handles: Vec<_> = slices
            .iter()
            .zip(numbers.iter_mut())
            .map(|(slice, numbers)| {
                let run = &run;
                s.spawn(move || write_files(inner, index, run, slice, numbers))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::InvalidArgument("an index build thread panicked".into())))
            })
            .collect()
    });
    pending.numbers.extend(numbers.into_iter().flatten());
    let mut outputs = Vec::new();
    let mut failed = None;
    for files in written {
        match files {
            Ok(files) => outputs.extend(files),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(outputs),
    }
}

/// Merges two sorted lists of a run's entries.
fn merge_sorted(run: &Run, lower: Vec<RunEntry>, upper: Vec<RunEntry>) -> Vec<RunEntry> {
    let mut out = Vec::with_capacity(lower.len() + upper.len());
    let (mut a, mut b) = (lower.into_iter().peekable(), upper.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => run.order(x, y).is_lt(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if take_a { a.next() } else { b.next() });
    }
}

/// Writes sorted entries of a run into new SSTs of `index`, each cut at
/// `Options::sst_bytes`, noting each file's number in `numbers` as it is
/// started. The entries' bytes lie scattered over the run's buffer: they
/// are first copied, a chunk at a time, into one buffer in order, a tight
/// loop whose cache misses overlap, where the SST writer taking them one
/// by one waited for each (three quarters of its time).
fn write_files(
    inner: &DbInner,
    index: TreeId,
    run: &Run,
    entries: &[RunEntry],
    numbers: &mut Vec<u64>,
) -> Result<Vec<FileMeta>> {
    const GATHER_ENTRIES: usize = 1024;
    let mut outputs = Vec::new();
    let mut current: Option<(TreeId, u64, crate::sst::writer::SstWriter)> = None;
    let mut gathered = Vec::new();
    for chunk in entries.chunks(GATHER_ENTRIES) {
        gathered.clear();
        for e in chunk {
            gathered
                .extend_from_slice(&run.bytes[e.start..e.start + e.key_len as usize + e.value_len as usize]);
        }
        let mut at = 0;
        for e in chunk {
            let (key_len, value_len) = (e.key_len as usize, e.value_len as usize);
            let key = &gathered[at..at + key_len];
            let value = &gathered[at + key_len..at + key_len + value_len];
            at += key_len + value_len;
            let writer = match &mut current {
                Some((_, _, w)) if w.estimated_file_bytes() < inner.opts.sst_bytes() => w,
                _ => {
                    outputs.extend(current.take().map(finish_sst).transpose()?.map(|(_, f)| f));
                    let started = inner.start_sst(index, None, false)?;
                    numbers.push(started.1);
                    &mut current.insert(started).2
                }
            };
            writer.add(key, pack_trailer(e.seqno, Kind::Put), value)?;
        }
    }
    outputs.extend(current.map(finish_sst).transpose()?.map(|(_, f)| f));
    Ok(outputs)
}

/// Gives each row a write touched since the build began its current entry
/// (or none, if it was deleted) and deletes the entry the snapshot gave it,
/// in batches through the WAL, newer than every entry of the index. The
/// upkeep of those writes already shadows the stale entries by seqno (the
/// build's snapshot keeps its deletes from being compacted away), but the
/// installed files may sit in a level above that upkeep; this batch makes
/// the newest version of each such entry the one nearest the top, whatever
/// the levels. The caller owns the write path, so the set of touched rows
/// is final: every later write keeps the whole index.
fn bring_touched_up_to_date(
    table: &Table,
    index: TreeId,
    layout: &IndexLayout,
    snapshot: &Snapshot,
) -> Result<()> {
    let inner = table.inner();
    let touched: Vec<Bytes> = inner.indexes.touched(index);
    if touched.is_empty() {
        return Ok(());
    }
    let sv = inner.versions.load_full();
    let now = inner.writer.last_seqno();
    let table_layout = table.layout();
    let mut batch = WriteBatch::new();
    for pk in &touched {
        let entry_at = |seqno| -> Result<Option<IndexEntry>> {
            let row = inner.current_row(&sv, seqno, table.tree(), pk, &table_layout)?;
            row.map(|row| Ok(layout.entry(pk, &RowValues::parse(&table_layout, pk, &row)?))).transpose()
        };
        let old = entry_at(snapshot.seqno())?;
        let new = entry_at(now)?;
        if let Some(old) = old
            && new.as_ref().is_none_or(|n| n.key != old.key)
        {
            batch.delete_raw(index, &old.key);
        }
        if let Some(new) = new {
            batch.put_raw(index, &new.key, &new.value);
        }
        // Committed in parts well within `batch_bytes_max`: one record of
        // every touched row could outgrow what the WAL can read back.
        if batch.encoded_len() >= inner.opts.batch_bytes_max / 2 {
            inner.commit_owned(std::mem::take(&mut batch))?;
        }
    }
    if batch.is_empty() {
        return Ok(());
    }
    inner.commit_owned(batch)
}

/// Fails with [`Error::UniqueViolation`] if two entries of the index at
/// `at` share their indexed values with no null among them.
fn check_unique(
    inner: &DbInner,
    index: TreeId,
    name: &str,
    layout: &IndexLayout,
    at: &Snapshot,
) -> Result<()> {
    let (seqno, sv) = inner.read_view(Some(at.seqno()));
    let all = (Bound::Unbounded, Bound::Unbounded);
    let mut entries = RangeReader::open(inner, &sv, seqno, index, all, Direction::Forward)?;
    let mut last: Option<Vec<u8>> = None;
    while let Some((key, _)) = entries.next_entry()? {
        let (parts, pk) = layout.split_key(&key)?;
        let prefix = &key[..key.len() - pk.len()];
        if parts.iter().any(Option::is_none) {
            last = None;
            continue;
        }
        if last.as_deref() == Some(prefix) {
            return Err(Error::UniqueViolation {
                index: name.to_string(),
                value: layout.describe_prefix(&key),
            });
        }
        last = Some(prefix.to_vec());
    }
    Ok(())
}

impl DbInner {
    /// Drops the indexes whose creation never finished (the process
    /// stopped during their backfill). Runs at open, before any write.
    pub(crate) fn drop_unfinished_indexes(&self) -> Result<()> {
        let catalog = self.versions.current().catalog.clone();
        let unfinished: Vec<TreeId> = catalog
            .records()
            .filter(|(_, _, kind)| matches!(kind, TreeKindRecord::Index { building: true, .. }))
            .map(|(id, _, _)| id)
            .collect();
        if unfinished.is_empty() {
            return Ok(());
        }
        self.install_edit(VersionEdit { trees_dropped: unfinished, ..VersionEdit::default() })
    }
}

/// A test hook run by an index build between writing its sorted runs and
/// installing them, so a test can make writes, flushes and compactions
/// land exactly there.
#[cfg(test)]
mod before_install {
    use std::cell::RefCell;

    thread_local! {
        static HOOK: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    /// Runs `f` in the next index build of this thread.
    pub(super) fn set(f: impl FnOnce() + 'static) {
        HOOK.with(|h| *h.borrow_mut() = Some(Box::new(f)));
    }

    pub(super) fn run() {
        if let Some(f) = HOOK.with(|h| h.borrow_mut().take()) {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    use crate::catalog::Namespace;
    use crate::io::MemFs;
    use crate::{Db, IndexOptions, IndexPredicate, KeyValue, Options, TableOptions};

    fn rows(ids: &[i64], city: &str) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("city", DataType::Utf8, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(vec![city; ids.len()])),
        ];
        RecordBatch::try_new(schema, columns).expect("batch")
    }

    /// A row changed after the build's snapshot, its upkeep (the delete of
    /// the snapshot's entry, the new entry) flushed and compacted to the
    /// bottom of the index tree before the build installs the stale entry
    /// above it: the row is found under its new value only. (The build's
    /// snapshot keeps that delete through the compaction, and the batch of
    /// touched rows deletes the stale entry again: either alone suffices.)
    #[test]
    fn a_row_changed_during_a_build_and_compacted_before_the_install_keeps_only_its_new_entry() {
        let opts = Options { fs: Arc::new(MemFs::new()), auto_compaction: false, ..Options::default() };
        let db = Arc::new(Db::open("/db", opts).expect("open"));
        let schema = rows(&[], "").schema();
        let table = db.create_table("t", schema, &["id"], TableOptions::default()).expect("create");
        table.write(&rows(&[1, 2, 3], "old")).expect("write");
        let (db2, t2) = (db.clone(), table.clone());
        super::before_install::set(move || {
            t2.write(&rows(&[2], "new")).expect("rewrite");
            let catalog = db2.inner().versions.load().version.catalog.clone();
            let (index, _) = catalog.find(Namespace::IndexesOf(t2.tree()), "by_city").expect("index tree");
            db2.inner().compact_range(index, &(Bound::Unbounded, Bound::Unbounded)).expect("compact");
        });
        table.create_index("by_city", &["city"], IndexOptions::default()).expect("index");
        let count = |city: &str| {
            table.count("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str(city))])).expect("count")
        };
        assert_eq!((count("old"), count("new")), (2, 1));
    }

    /// A panic during the backfill leaves no index and no build state:
    /// the panic goes on to the caller, the index is gone, and later
    /// writes note no touched rows for it.
    #[test]
    fn a_panic_during_a_build_leaves_no_index_behind() {
        let opts = Options { fs: Arc::new(MemFs::new()), ..Options::default() };
        let db = Db::open("/db", opts).expect("open");
        let schema = rows(&[], "").schema();
        let table = db.create_table("t", schema, &["id"], TableOptions::default()).expect("create");
        table.write(&rows(&[1, 2, 3], "old")).expect("write");
        super::before_install::set(|| panic!("injected"));
        let build = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            table.create_index("by_city", &["city"], IndexOptions::default())
        }));
        assert!(build.is_err(), "the panic reaches the caller");
        let catalog = db.inner().versions.load().version.catalog.clone();
        assert!(catalog.find(Namespace::IndexesOf(table.tree()), "by_city").is_none(), "index left");
        table.write(&rows(&[4], "new")).expect("write after");
        assert!(db.inner().indexes.is_empty(), "build state left");
        table.create_index("by_city", &["city"], IndexOptions::default()).expect("index again");
        let count =
            table.count("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str("old"))])).expect("count");
        assert_eq!(count, 3);
    }
}
