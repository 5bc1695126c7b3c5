//! SST files made outside a database and ingested into one: RocksDB's
//! `SstFileWriter` and `IngestExternalFile`, with the files built by the
//! engine's own bulk-load writer (every block, filter, zone map and model).
//!
//! [`Table::write_sst_files`](crate::Table::write_sst_files) sorts a
//! table's rows and writes them as finished SSTs into any directory, at a
//! seqno the caller gives (one more per further sorted run), each file
//! within one of the key ranges the caller's cut points make. Nothing of
//! the database changes, so a read-only handle writes them too: a Ray task
//! writes the files of every shard it has rows for while the shards serve
//! reads. The files name file 0 and record their rows' schema version
//! (format version 9): they are numbered when ingested, and the schema
//! version comes from the file, not from whoever passes it on.
//!
//! [`Table::ingest_files`](crate::Table::ingest_files) installs files (the
//! part of each that lies in a key range) into the table in one MANIFEST
//! edit. A file wholly in the range is hard-linked into the database (a
//! copy where links are impossible); one that straddles the range's edge
//! is rewritten with only its rows in the range; one outside is skipped.
//! The files' rows keep their seqnos, which must all lie above every seqno
//! the database has used (else the ingest is refused as a conflict: the
//! database was written after the files were made, and its newer rows
//! would shadow theirs). Where files overlap, the higher seqno wins a
//! repeated key, as a later write would; two overlapping files of one
//! seqno are refused, as nothing would say which wins. Overlapping files
//! land in L0 as runs, which the ingest then compacts over their span (as
//! `bulk_load` does; also when L0 reaches `l0_compaction_trigger`): files
//! of several writers over one key range are written twice, files that do
//! not overlap once.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::RecordBatch;

use super::{BulkLoad, FileHome, Pending};
use crate::codec::internal::SEQNO_MAX;
use crate::db::jobs::flush::finish_sst;
use crate::db::read::cursor::{KeyRange, span_overlaps};
use crate::db::state::inner::DbInner;
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::io::Fs;
use crate::row::layout::TableLayout;
use crate::sst::block_cache::BlockCache;
use crate::sst::format::EXTERNAL_FILE_NUMBER;
use crate::sst::iter::SstIter;
use crate::sst::reader::SstReader;
use crate::sst::writer::SstWriter;
use crate::version::edit::{FileMeta, MergedReads, ReaderSlot};

/// A file [`Table::write_sst_files`](crate::Table::write_sst_files) wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalSst {
    /// Where it is.
    pub path: PathBuf,
    /// Rows it holds.
    pub rows: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// Which of the key ranges the cut points make holds its rows: 0 below
    /// the first cut point, `i` from cut point `i - 1` up to cut point `i`
    /// (the last, `cut_at.len()`, from the last cut point on).
    pub range: usize,
    /// The seqno of its rows (of the run it belongs to).
    pub seqno: u64,
}

/// The directory a `write_sst_files` call writes into, and the files it
/// made there: deleted again unless the call succeeds.
pub(crate) struct ExternalDir {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    /// The files' names start with it: unique to this call, so calls that
    /// share a directory never write one file.
    stem: String,
    /// The next file's number: files `1..next` were started (their names
    /// follow from their numbers, so no list of them is kept).
    next: AtomicU64,
    kept: bool,
}

impl ExternalDir {
    fn new(fs: Arc<dyn Fs>, dir: &Path, seqno: u64) -> ExternalDir {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let stem =
            format!("{seqno}-{}-{nanos:x}-{}", std::process::id(), CALLS.fetch_add(1, Ordering::Relaxed));
        ExternalDir { fs, dir: dir.to_path_buf(), stem, next: AtomicU64::new(1), kept: false }
    }

    fn path(&self, n: u64) -> PathBuf {
        self.dir.join(format!("{}-{n:06}.sst", self.stem))
    }

    /// Starts the next file of `tree`, whose rows have `layout`.
    pub(crate) fn start(
        &self,
        inner: &DbInner,
        tree: TreeId,
        layout: &Arc<TableLayout>,
    ) -> Result<(TreeId, u64, SstWriter)> {
        // Numbered before it exists: a create that fails half way leaves
        // nothing behind either.
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.path(n);
        let file = inner.fs.create(&path)?;
        let options = inner.sst_writer_options(tree, Some(layout.clone()), true, EXTERNAL_FILE_NUMBER);
        Ok((tree, n, SstWriter::new(file, path, &options)))
    }
}

impl Drop for ExternalDir {
    fn drop(&mut self) {
        if !self.kept {
            for n in 1..*self.next.get_mut() {
                // Best effort: a file left behind is the caller's to delete.
                let _ = self.fs.remove(&self.path(n));
            }
        }
    }
}

/// A file to ingest, opened and checked.
struct Candidate {
    path: PathBuf,
    reader: Arc<SstReader>,
    schema_version: u32,
}

impl DbInner {
    /// Writes `batches` as SSTs of table `tree` into `dir`; see
    /// [`Table::write_sst_files`](crate::Table::write_sst_files). `cuts`
    /// are encoded keys, strictly ascending.
    pub(crate) fn write_sst_files(
        &self,
        (tree, layout): (TreeId, &Arc<TableLayout>),
        dir: &Path,
        seqno: u64,
        cuts: &[Vec<u8>],
        batches: &mut dyn Iterator<Item = Result<RecordBatch>>,
    ) -> Result<Vec<ExternalSst>> {
        if !(1..=SEQNO_MAX).contains(&seqno) {
            return Err(Error::InvalidArgument(format!("seqno {seqno} is outside 1..={SEQNO_MAX}")));
        }
        if cuts.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::InvalidArgument("cut points must ascend strictly in the key order".into()));
        }
        self.fs.create_dir_all(dir)?;
        let mut external = ExternalDir::new(self.fs.clone(), dir, seqno);
        // No database file is made: the pending list stays empty.
        let mut pending = Pending::new(self);
        let (outputs, _) = self.write_loaded_ssts(
            (tree, layout),
            batches,
            seqno,
            (FileHome::External(&external), cuts),
            &mut pending,
        )?;
        if !outputs.is_empty() {
            self.fs.sync_dir(dir)?;
        }
        external.kept = true;
        Ok(outputs
            .into_iter()
            .map(|f| ExternalSst {
                path: external.path(f.number),
                rows: f.entries,
                bytes: f.size,
                range: cuts.partition_point(|c| c.as_slice() <= f.smallest.user_key.as_ref()),
                seqno: f.max_seqno,
            })
            .collect())
    }

    /// Ingests the part of each file in `paths` that lies in `range` into
    /// table `tree`; see [`Table::ingest_files`](crate::Table::ingest_files).
    pub(crate) fn ingest_files(
        &self,
        (tree, layout): (TreeId, &Arc<TableLayout>),
        paths: &[PathBuf],
        range: &KeyRange,
    ) -> Result<BulkLoad> {
        self.check_writable()?;
        // Checked before any file is made, and again under the writer right.
        self.check_loadable(tree, layout, "ingest_files")?;
        let candidates = self.open_candidates(tree, paths)?;
        check_seqnos_disjoint(&candidates)?;
        // Outside the writer right: its drop may run a collection, which
        // comes before the writer right in the lock order.
        let mut pending = Pending::new(self);
        let mut outputs = Vec::new();
        for c in &candidates {
            let p = c.reader.properties();
            let (lo, hi) = (p.smallest.user_key.as_ref(), p.largest.user_key.as_ref());
            if !span_overlaps(range, lo, hi) {
                continue;
            }
            if key_in(range, lo) && key_in(range, hi) {
                outputs.push(self.link_external(c, &mut pending)?);
            } else {
                outputs.extend(self.clip_external(c, (tree, layout), range, &mut pending)?);
            }
        }
        if outputs.is_empty() {
            return Ok(BulkLoad::default());
        }
        self.fs.sync_dir(&self.dir)?;
        let files_disjoint = {
            let mut spans: Vec<(&[u8], &[u8])> =
                outputs.iter().map(|f| (f.smallest.user_key.as_ref(), f.largest.user_key.as_ref())).collect();
            spans.sort_unstable();
            spans.windows(2).all(|w| w[0].1 < w[1].0)
        };
        let mut seqnos: Vec<u64> = outputs.iter().map(|f| f.max_seqno).collect();
        seqnos.sort_unstable();
        seqnos.dedup();
        let newest = seqnos.last().copied().unwrap_or_default();
        let span = (
            outputs
                .iter()
                .map(|f| f.smallest.user_key.to_vec())
                .min()
                .map_or(Bound::Unbounded, Bound::Included),
            outputs
                .iter()
                .map(|f| f.largest.user_key.to_vec())
                .max()
                .map_or(Bound::Unbounded, Bound::Included),
        );
        let oldest = outputs.iter().map(|f| f.min_seqno).min().unwrap_or_default();
        // Files that do not overlap make one sorted run whatever their
        // seqnos: it goes to the deepest level free in its range.
        let runs = if files_disjoint { 1 } else { seqnos.len() as u64 };
        self.with_exclusive_writer(|| {
            self.check_writable()?;
            self.check_loadable(tree, layout, "ingest_files")?;
            // As a bulk load does: recovery takes the raised last seqno as
            // the end of what was flushed.
            self.flush_everything()?;
            let last = self.writer.last_seqno();
            if oldest <= last {
                return Err(Error::Conflict(format!(
                    "the files' rows are at seqno {oldest} and up, and this database has used seqnos up to \
                     {last}: it was written after they were made; write them again with a seqno above {last}"
                )));
            }
            // See `bulk_load` for this exception to the lock order.
            let _no_compaction = self.jobs.compaction_slot();
            self.install_pending(tree, outputs, runs, Some(newest), &mut pending)
        })
        .and_then(|load| {
            // Overlapping runs went to L0 (files of several writers over one
            // key range), or one run went there over what L0 held: merged
            // down now over their span, as `bulk_load` does. Left there, a
            // scan merges them row by row (measured, issue 63: a Ray read of
            // 4 shards holding 2 overlapping runs each took 0.70M rows/s
            // against 3.84M with one run), and the database may next be
            // opened read-only, where no compaction runs; past the trigger
            // writers would stall on the L0 count too.
            if load.runs > 1 || self.l0_files(tree) >= self.opts.l0_compaction_trigger.max(1) {
                self.compact_range(tree, &span)?;
            }
            Ok(load)
        })
    }

    /// How many files table `tree` holds in L0.
    fn l0_files(&self, tree: TreeId) -> usize {
        self.versions.load().version.tree(tree).map_or(0, |t| t.levels[0].len())
    }

    /// Opens each file and checks that it is one `write_sst_files` made for
    /// table `tree`, under a schema version the table knows.
    fn open_candidates(&self, tree: TreeId, paths: &[PathBuf]) -> Result<Vec<Candidate>> {
        let catalog = self.versions.load().version.catalog.clone();
        let name = catalog.tree(tree).map_or_else(|| format!("{tree}"), |t| t.name.clone());
        // A cache of their own: the files are read once here (a clipped one
        // to its end), and their numbers are not the database's.
        let cache = Arc::new(BlockCache::new(1 << 20));
        paths
            .iter()
            .map(|path| {
                let reader = SstReader::open(self.fs.as_ref(), path, u64::MAX, cache.clone(), false)?;
                let p = reader.properties();
                let bad = |what: String| Err(Error::InvalidArgument(format!("{}: {what}", path.display())));
                let Some(schema_version) = p.schema_version else {
                    return bad(format!(
                        "an SST of format version {}, not one write_sst_files made",
                        p.format_version
                    ));
                };
                if p.file_number != Some(EXTERNAL_FILE_NUMBER) {
                    return bad(
                        "a database's own SST (it names its file number), not one write_sst_files made"
                            .into(),
                    );
                }
                if p.tree_id != tree {
                    return bad(format!(
                        "holds rows of tree {}, not of table {name} (tree {tree})",
                        p.tree_id
                    ));
                }
                if p.deletions != 0 {
                    return bad(format!("holds {} deletions; write_sst_files writes rows only", p.deletions));
                }
                if !catalog.knows_version(tree, schema_version) {
                    return bad(format!(
                        "its rows are of schema version {schema_version}, which table {name} never had"
                    ));
                }
                // The numbers above are each database's own: the layout's
                // fingerprint tells a file of another table (another
                // database's, or one altered differently) from this one's.
                let expected = catalog.table_layout(tree).and_then(|current| {
                    if current.version() == schema_version {
                        Some(current.fingerprint())
                    } else {
                        current.older_version(schema_version).ok().flatten().map(|o| o.layout.fingerprint())
                    }
                });
                if expected.is_none() || p.layout_fingerprint != expected {
                    return bad(format!(
                        "its rows were written for a table whose columns differ from table {name}'s (at schema \
                         version {schema_version}): another database's table, or one altered differently"
                    ));
                }
                Ok(Candidate { path: path.clone(), reader, schema_version })
            })
            .collect()
    }

    /// Links a file wholly in the range into the database under a new
    /// number (held in `pending` until installed).
    fn link_external(&self, c: &Candidate, pending: &mut Pending<'_>) -> Result<FileMeta> {
        let number = self.versions.new_file_number_held(&self.files);
        pending.numbers.push(number);
        self.fs.link(&c.path, &self.dir.join(crate::files::sst(number)))?;
        let p = c.reader.properties();
        Ok(FileMeta {
            number,
            size: c.reader.file_size(),
            entries: p.entries,
            min_seqno: p.min_seqno,
            max_seqno: p.max_seqno,
            smallest: p.smallest.clone(),
            largest: p.largest.clone(),
            blob_refs: Vec::new(),
            schema_version: c.schema_version,
            reader: ReaderSlot::default(),
            merged_reads: MergedReads::default(),
        })
    }

    /// Writes the rows of a file that lie in `range` into new files of the
    /// database (under the table's current schema version, as compaction
    /// writes them).
    fn clip_external(
        &self,
        c: &Candidate,
        (tree, layout): (TreeId, &Arc<TableLayout>),
        range: &KeyRange,
        pending: &mut Pending<'_>,
    ) -> Result<Vec<FileMeta>> {
        let mut it = SstIter::reading_ahead(c.reader.clone());
        match &range.0 {
            std::ops::Bound::Unbounded => it.seek_to_first()?,
            std::ops::Bound::Included(k) | std::ops::Bound::Excluded(k) => {
                // The largest trailer sorts first among a key's entries.
                it.seek(k, u64::MAX)?;
            }
        }
        let mut outputs = Vec::new();
        let mut current: Option<(TreeId, u64, SstWriter)> = None;
        let mut adapted = None;
        while it.valid() {
            let key = it.user_key();
            if !key_in(range, key) {
                if past_upper(range, key) {
                    break;
                }
                it.next()?;
                continue;
            }
            if current.as_ref().is_some_and(|(_, _, w)| w.estimated_file_bytes() >= self.opts.sst_bytes()) {
                outputs.extend(current.take().map(finish_sst).transpose()?.map(|(_, f)| f));
            }
            if current.is_none() {
                let started = self.start_sst(tree, Some(layout.clone()), true)?;
                pending.numbers.push(started.1);
                current = Some(started);
            }
            let Some((_, _, w)) = current.as_mut() else { break };
            let Some((block, i)) = it.current() else { break };
            let block = block.clone();
            let trailer = it.trailer();
            crate::db::jobs::compact::add_table_row(
                w,
                layout,
                c.schema_version,
                (&block, i),
                (it.user_key(), trailer),
                &mut adapted,
            )?;
            it.next()?;
        }
        outputs.extend(current.take().map(finish_sst).transpose()?.map(|(_, f)| f));
        Ok(outputs)
    }
}

/// Refuses two files of one seqno whose key spans overlap: nothing would
/// say which of their rows with one key wins. (A file `write_sst_files`
/// made holds one seqno.)
fn check_seqnos_disjoint(candidates: &[Candidate]) -> Result<()> {
    let mut spans: Vec<(u64, &[u8], &[u8], &Path)> = candidates
        .iter()
        .map(|c| {
            let p = c.reader.properties();
            (p.max_seqno, p.smallest.user_key.as_ref(), p.largest.user_key.as_ref(), c.path.as_path())
        })
        .collect();
    spans.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    // Sorted by seqno, then by first key: a file overlaps an earlier one
    // of its seqno when it starts at or below the largest end before it.
    let mut reach: Option<(u64, &[u8], &Path)> = None;
    for &(seqno, lo, hi, path) in &spans {
        match reach {
            Some((s, end, other)) if s == seqno && lo <= end => {
                return Err(Error::InvalidArgument(format!(
                    "{} and {} hold rows of one seqno ({seqno}) with overlapping keys: write them with \
                     different seqnos",
                    other.display(),
                    path.display()
                )));
            }
            Some((s, end, _)) if s == seqno && hi <= end => {}
            _ => reach = Some((seqno, hi, path)),
        }
    }
    Ok(())
}

/// Whether `key` lies in `range`.
fn key_in((lo, hi): &KeyRange, key: &[u8]) -> bool {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let above = match lo {
        Unbounded => true,
        Included(l) => key >= l.as_slice(),
        Excluded(l) => key > l.as_slice(),
    };
    above && !past_upper(&(Unbounded, hi.clone()), key)
}

/// Whether `key` lies above `range`'s upper bound.
fn past_upper((_, hi): &KeyRange, key: &[u8]) -> bool {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    match hi {
        Unbounded => false,
        Included(h) => key > h.as_slice(),
        Excluded(h) => key >= h.as_slice(),
    }
}
