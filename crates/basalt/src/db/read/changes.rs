//! The change feed: the committed changes of one table or keyspace after a
//! seqno, in commit order, read from the WAL (`wal/format.rs`), which
//! holds every commit in order with its seqnos, a delete's key, and the
//! commit time in each group's seal. A consumer resumes from the last
//! seqno it read.
//!
//! While some tree keeps history with a duration, WAL files stay for the
//! longest window (`jobs/cleanup.rs`), so the feed reaches back as far as
//! reads as of a past point do. Only the changes a commit made are here:
//! a bulk load, which bypasses the WAL, is refused on a table keeping
//! history (`jobs/ingest.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, TimestampMillisecondArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;

use crate::catalog::TreeKind;
use crate::codec::internal::{Kind, SeqNo};
use crate::db::read::history::describe_ms;
use crate::db::state::inner::DbInner;
use crate::error::{Error, Result};
use crate::files;
use crate::ids::TreeId;
use crate::log::format::{HEADER_BYTES, mask_crc, parse_header};
use crate::log::reader::read_log;
use crate::row::layout::TableLayout;
use crate::wal::batch;

/// Name of the operation column of a table's change feed: `"upsert"`,
/// `"delete"` or `"delete_range"`.
pub const CHANGE_OP: &str = "_op";

/// Names of the columns a table's change feed ends with: a range delete's
/// first key and the key its range ends before (null: no end), in the
/// engine's key encoding (`docs/key-encoding.md`); null on other rows,
/// which name their key in the key columns (null on a range delete's row).
pub const CHANGE_RANGE_START: &str = "_range_start";
/// See [`CHANGE_RANGE_START`].
pub const CHANGE_RANGE_END: &str = "_range_end";

/// One change of a keyspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The seqno of the write.
    pub seqno: u64,
    /// When it was committed (to the millisecond), if on record.
    pub commit_time: Option<SystemTime>,
    /// The key written.
    pub key: Bytes,
    /// The value set; `None` for a delete.
    pub value: Option<Bytes>,
    /// For a range delete (`key` its first key, `value` `None`): where the
    /// range ends, before a key or with the key space. `None` for a
    /// change of one key.
    pub range_end: Option<std::ops::Bound<Bytes>>,
    /// The value is a merge operand (`Keyspace::merge`), not the key's
    /// new value.
    pub merge: bool,
}

/// What the feed hands each WAL record to: its payload, file, offset and
/// commit time; false: stop.
type EmitCommit<'e> = dyn FnMut(&[u8], &Path, u64, Option<u64>) -> Result<bool> + 'e;

/// One WAL entry of the tree asked for.
enum Entry<'a> {
    Key { seqno: SeqNo, kind: Kind, key: &'a [u8], value: &'a [u8] },
    Rows { first: SeqNo, kind: Kind, ipc: &'a [u8], rows: u32, path: &'a Path, offset: u64 },
    Range { seqno: SeqNo, start: &'a [u8], end: Option<&'a [u8]> },
}

impl DbInner {
    /// The WAL files in the directory, ascending.
    fn wal_numbers(&self) -> Result<Vec<u64>> {
        Ok(files::wal_numbers(&self.fs.list(&self.dir)?))
    }

    /// The seqno of the first commit in WAL `number` (`None`: it holds none
    /// yet, or its first record did not survive whole), read from its
    /// first record, checksum verified: a header whose payload a power
    /// loss left as zeros names no commit.
    pub(crate) fn wal_first_seqno(&self, number: u64) -> Result<Option<SeqNo>> {
        let path = self.dir.join(files::wal(number));
        let file = match self.fs.open(&path) {
            Ok(f) => f,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if file.len() < (HEADER_BYTES + crate::wal::format::BATCH_HEADER_BYTES) as u64 {
            return Ok(None);
        }
        let head = file.read_at(0, HEADER_BYTES)?;
        let Some(header) = parse_header(&head) else { return Ok(None) };
        if header.len < crate::wal::format::BATCH_HEADER_BYTES
            || (HEADER_BYTES + header.len) as u64 > file.len()
        {
            return Ok(None);
        }
        let payload = file.read_at(HEADER_BYTES as u64, header.len)?;
        if mask_crc(crc32c::crc32c(&payload)) != header.payload_crc {
            return Ok(None);
        }
        let first = u64::from_le_bytes([
            payload[0], payload[1], payload[2], payload[3], payload[4], payload[5], payload[6], payload[7],
        ]);
        // Seqnos start at 1.
        Ok((first > 0).then_some(first))
    }

    /// The oldest `since` a change feed can start from: the seqno before
    /// the first commit in the oldest WAL kept.
    fn feed_start(&self, wals: &[u64]) -> Result<SeqNo> {
        for &n in wals {
            if let Some(first) = self.wal_first_seqno(n)? {
                return Ok(first.saturating_sub(1));
            }
        }
        Ok(self.writer.visible_seqno())
    }

    /// Calls `f` with each change to `tree` after `since`, in commit order,
    /// with its commit time, until `f` says stop; refused when the WAL
    /// kept no longer reaches back to `since`.
    fn walk_changes(
        &self,
        (tree, name): (TreeId, &str),
        since: SeqNo,
        visible: SeqNo,
        f: &mut dyn FnMut(Entry<'_>, Option<u64>) -> Result<bool>,
    ) -> Result<()> {
        self.check_open()?;
        let catalog = self.versions.load().version.catalog.clone();
        if catalog.tree(tree).is_none() {
            return Err(Error::InvalidArgument(format!("{name} was dropped")));
        }
        if since >= visible {
            return Ok(());
        }
        let Some(history) = catalog.history(tree) else {
            return Err(Error::HistoryUnavailable {
                what: format!("{name} keeps no history (set a history window first)"),
                oldest_seqno: None,
            });
        };
        let wals = self.wal_numbers()?;
        // The feed reaches back to the oldest WAL kept, and no further than
        // the tree's history (bulk loads, which bypass the WAL, are refused
        // only from then on).
        let oldest = self.feed_start(&wals)?.max(history.since);
        if since < oldest {
            return Err(Error::HistoryUnavailable {
                what: format!(
                    "the changes of {name} after seqno {since} are no longer kept: the feed starts after seqno {oldest}{}",
                    self.clock.time_of(oldest).map(|t| format!(" ({})", describe_ms(t))).unwrap_or_default()
                ),
                oldest_seqno: Some(oldest),
            });
        }
        // Skip the files whose commits all lie at or below `since`.
        let mut firsts = Vec::with_capacity(wals.len());
        for &n in &wals {
            firsts.push(self.wal_first_seqno(n)?);
        }
        let skip = (0..wals.len())
            .take_while(|&i| {
                firsts[i + 1..].iter().flatten().next().is_some_and(|&next| next <= since.saturating_add(1))
            })
            .count();
        // One commit's entries of `tree`, handed to `f`; false: stop.
        let mut emit = |payload: &[u8], path: &Path, offset: u64, time: Option<u64>| -> Result<bool> {
            let decoded = batch::decode(payload, path, offset)?;
            let mut seqno = decoded.first_seqno;
            for entry in &decoded.entries {
                let n = entry.seqnos();
                let (first, last) = (seqno, seqno + n - 1);
                seqno += n;
                if first > visible {
                    return Ok(false);
                }
                if entry.tree != tree || last <= since {
                    continue;
                }
                let e = if let Some(end) = entry.range_end {
                    Entry::Range { seqno: first, start: entry.key, end: end.key() }
                } else if entry.arrow_rows == 0 {
                    Entry::Key { seqno: first, kind: entry.kind, key: entry.key, value: entry.value }
                } else {
                    Entry::Rows {
                        first,
                        kind: entry.kind,
                        ipc: entry.value,
                        rows: entry.arrow_rows,
                        path,
                        offset,
                    }
                };
                if !f(e, time)? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        for &number in &wals[skip..] {
            if !self.feed_from_wal(number, (name, since), &mut emit)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Hands `emit` each commit of WAL `number` from near seqno `since`
    /// on, with its time; false when `emit` said stop.
    fn feed_from_wal(
        &self,
        number: u64,
        (name, since): (&str, SeqNo),
        emit: &mut EmitCommit<'_>,
    ) -> Result<bool> {
        let path = self.dir.join(files::wal(number));
        let file = match self.fs.open(&path) {
            Ok(file) => file,
            // Collected meanwhile: its commits are older than the window
            // now, and so is `since`.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::HistoryUnavailable {
                    what: format!("the WAL holding the changes of {name} after seqno {since} was collected"),
                    oldest_seqno: None,
                });
            }
            Err(e) => return Err(e),
        };
        // From the record the index says holds `since + 1` (or before).
        let start = self.feed_index.offset_for(number, since.saturating_add(1));
        let mut records = WalRecords::new(file.as_ref(), start);
        // A commit group's records, handed out once its seal (and time)
        // is read.
        let mut group: Vec<(u64, Vec<u8>)> = Vec::new();
        loop {
            match records.next()? {
                WalRecord::Data(offset, payload) => {
                    if payload.len() >= 8 {
                        let first = u64::from_le_bytes([
                            payload[0], payload[1], payload[2], payload[3], payload[4], payload[5],
                            payload[6], payload[7],
                        ]);
                        self.feed_index.note(number, offset, first);
                    }
                    group.push((offset, payload));
                }
                WalRecord::Seal(time) => {
                    for (offset, payload) in group.drain(..) {
                        if !emit(&payload, &path, offset, time)? {
                            return Ok(false);
                        }
                    }
                }
                // The end, or a torn tail: the records of a group whose
                // seal did not survive were replayed by recovery, and
                // have no time.
                WalRecord::End => {
                    for (offset, payload) in group.drain(..) {
                        if !emit(&payload, &path, offset, None)? {
                            return Ok(false);
                        }
                    }
                    return Ok(true);
                }
                // A damaged record: the whole-log reader tells a torn
                // tail from corruption (which it reports, with the file
                // and offset).
                WalRecord::Damaged(at) => {
                    let rest = file.read_at(at, usize::try_from(file.len() - at).unwrap_or(usize::MAX))?;
                    let log = read_log(&path, &rest)?;
                    let mut seals = log.seal_times.iter().peekable();
                    let time_of =
                        |i: usize, seals: &mut std::iter::Peekable<std::slice::Iter<'_, (usize, u64)>>| {
                            while seals.peek().is_some_and(|&&(before, _)| before <= i) {
                                seals.next();
                            }
                            seals.peek().map(|&&(_, ms)| ms)
                        };
                    let first_time = time_of(0, &mut seals);
                    for (offset, payload) in group.drain(..) {
                        if !emit(&payload, &path, offset, first_time)? {
                            return Ok(false);
                        }
                    }
                    for (i, (offset, payload)) in log.records.iter().enumerate() {
                        let time = time_of(i, &mut seals);
                        if !emit(payload, &path, at + offset, time)? {
                            return Ok(false);
                        }
                    }
                    return Ok(true);
                }
            }
        }
    }

    /// A keyspace's changes after `since`, at most `limit`.
    pub(crate) fn key_changes(
        &self,
        tree: TreeId,
        name: &str,
        since: SeqNo,
        limit: usize,
    ) -> Result<Vec<Change>> {
        let mut out = Vec::new();
        let time = |ms: Option<u64>| ms.map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
        let visible = self.writer.visible_seqno();
        self.walk_changes((tree, name), since, visible, &mut |entry, ms| {
            match entry {
                Entry::Key { seqno, kind, key, value } => out.push(Change {
                    seqno,
                    commit_time: time(ms),
                    key: Bytes::copy_from_slice(key),
                    value: (kind != Kind::Delete).then(|| Bytes::copy_from_slice(value)),
                    range_end: None,
                    merge: kind == Kind::Merge,
                }),
                Entry::Range { seqno, start, end } => out.push(Change {
                    seqno,
                    commit_time: time(ms),
                    key: Bytes::copy_from_slice(start),
                    value: None,
                    range_end: Some(end.map_or(std::ops::Bound::Unbounded, |e| {
                        std::ops::Bound::Excluded(Bytes::copy_from_slice(e))
                    })),
                    merge: false,
                }),
                Entry::Rows { first, kind, ipc, path, offset, .. } => {
                    // A keyspace's table face: rows of (key, value).
                    let rows = crate::row::batch_from_ipc(ipc)
                        .map_err(|e| Error::corruption(path, offset, e.reason()))?;
                    for r in 0..rows.num_rows() {
                        let cell = |c: usize| -> Result<Bytes> {
                            rows.columns()
                                .get(c)
                                .and_then(|col| col.as_any().downcast_ref::<arrow_array::BinaryArray>())
                                .filter(|col| col.is_valid(r))
                                .map(|col| Bytes::copy_from_slice(col.value(r)))
                                .ok_or_else(|| {
                                    Error::corruption(path, offset, "a keyspace row that is not binary")
                                })
                        };
                        let seqno = first + r as u64;
                        if seqno <= since {
                            continue;
                        }
                        out.push(Change {
                            seqno,
                            commit_time: time(ms),
                            key: cell(0)?,
                            value: if kind == Kind::Delete { None } else { Some(cell(1)?) },
                            range_end: None,
                            merge: false,
                        });
                    }
                }
            }
            out.truncate(limit);
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// A table's changes after `since`, at most `limit` rows, as one batch
    /// (see [`feed_schema`]) in the table's current schema (a keyspace's
    /// table face: its key-value layout).
    pub(crate) fn row_changes(
        &self,
        tree: TreeId,
        name: &str,
        since: SeqNo,
        limit: usize,
    ) -> Result<RecordBatch> {
        // The seqno first, then the layout: every row up to the seqno was
        // written under this layout's version or an earlier one.
        let visible = self.writer.visible_seqno();
        let catalog = self.versions.load().version.catalog.clone();
        let (layout, starts) = match catalog.tree(tree).map(|t| &t.kind) {
            Some(TreeKind::Table(t)) => (t.layout.clone(), t.version_starts.clone()),
            Some(TreeKind::Keyspace) => (Arc::new(TableLayout::key_value()), Arc::default()),
            _ => return Err(Error::InvalidArgument(format!("{name} was dropped"))),
        };
        let schema = feed_schema(&layout);
        let mut parts: Vec<RecordBatch> = Vec::new();
        let mut rows_out = 0usize;
        let columns_of_table = layout.schema().fields().len();
        self.walk_changes((tree, name), since, visible, &mut |entry, ms| {
            let mut range = None;
            let (first, kind, columns) = match entry {
                // A range delete: one row, its bounds in the last columns.
                Entry::Range { seqno, start, end } => {
                    range = Some((start, end));
                    let columns = layout
                        .schema()
                        .fields()
                        .iter()
                        .map(|f| arrow_array::new_null_array(f.data_type(), 1))
                        .collect::<Vec<ArrayRef>>();
                    (seqno, Kind::Delete, columns)
                }
                Entry::Rows { first, kind, ipc, rows, path, offset } => {
                    let batch = crate::row::batch_from_ipc(ipc)
                        .map_err(|e| Error::corruption(path, offset, e.reason()))?;
                    if batch.num_rows() != rows as usize {
                        return Err(Error::corruption(
                            path,
                            offset,
                            "an entry's row count differs from its rows",
                        ));
                    }
                    let version = version_at(&layout, &starts, first);
                    let columns = current_columns(&layout, version, &batch, kind == Kind::Delete)
                        .map_err(|e| Error::corruption(path, offset, e))?;
                    (first, kind, columns)
                }
                // A keyspace's key-value write, read through its table face.
                Entry::Key { seqno, kind, key, value } => {
                    let value = (kind != Kind::Delete).then_some(value);
                    let columns: Vec<ArrayRef> = vec![
                        Arc::new(arrow_array::BinaryArray::from_vec(vec![key])),
                        Arc::new(arrow_array::BinaryArray::from_opt_vec(vec![value])),
                    ];
                    (seqno, kind, columns)
                }
            };
            let n_rows = columns.first().map_or(0, Array::len);
            // Rows at or below `since` (a resumed feed inside one entry).
            let skip = usize::try_from(since.saturating_sub(first.saturating_sub(1)))
                .unwrap_or(usize::MAX)
                .min(n_rows);
            let n = (n_rows - skip).min(limit - rows_out);
            let op = match (range, kind) {
                (Some(_), _) => "delete_range",
                (None, Kind::Delete) => "delete",
                (None, _) => "upsert",
            };
            let mut cols: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from(vec![op; n])),
                Arc::new(UInt64Array::from_iter_values((0..n as u64).map(|i| first + skip as u64 + i))),
                Arc::new(
                    TimestampMillisecondArray::from(vec![
                        ms.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
                        n
                    ])
                    .with_timezone("UTC"),
                ),
            ];
            debug_assert_eq!(columns.len(), columns_of_table);
            cols.extend(columns.iter().map(|c| c.slice(skip, n)));
            let (start, end) = match range {
                Some((start, end)) => (Some(start), end),
                None => (None, None),
            };
            cols.push(Arc::new(arrow_array::BinaryArray::from_opt_vec(vec![start; n])));
            cols.push(Arc::new(arrow_array::BinaryArray::from_opt_vec(vec![end; n])));
            parts.push(
                RecordBatch::try_new(schema.clone(), cols)
                    .map_err(|e| Error::internal(format!("a change of table {name}: {e}")))?,
            );
            rows_out += n;
            Ok(rows_out < limit)
        })?;
        arrow_select::concat::concat_batches(&schema, &parts)
            .map_err(|e| Error::internal(format!("joining the changes of {name}: {e}")))
    }
}

/// The schema version the rows of a commit at `seqno` were written under:
/// the last version that began before it (`starts`, recorded by each
/// change of columns), or, before the first recorded change, the version
/// that change replaced.
fn version_at(layout: &TableLayout, starts: &[(u32, SeqNo)], seqno: SeqNo) -> u32 {
    match starts.iter().filter(|&&(_, start)| start < seqno).map(|&(v, _)| v).max() {
        Some(v) => v,
        None => starts.iter().map(|&(v, _)| v).min().map_or(layout.version(), |v| v.saturating_sub(1)),
    }
}

/// The schema of a table's change feed: `_op`, `_seqno`, `_commit_time`,
/// then the table's columns, every one nullable (a delete holds only its
/// key, a range delete none), then `_range_start` and `_range_end`.
pub(crate) fn feed_schema(layout: &TableLayout) -> SchemaRef {
    let mut fields = vec![
        Field::new(CHANGE_OP, DataType::Utf8, false),
        Field::new(crate::db::read::key_history::HISTORY_SEQNO, DataType::UInt64, false),
        Field::new(
            crate::db::read::key_history::HISTORY_COMMIT_TIME,
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ];
    fields.extend(layout.schema().fields().iter().map(|f| f.as_ref().clone().with_nullable(true)));
    fields.push(Field::new(CHANGE_RANGE_START, DataType::Binary, true));
    fields.push(Field::new(CHANGE_RANGE_END, DataType::Binary, true));
    Arc::new(Schema::new(fields))
}

/// The columns of `batch`, rows as the WAL holds them — written under
/// schema `version` of the table; key rows for a delete — in the current
/// `layout`'s schema: an older version's rows adapted as an older file's
/// are (`row/evolve.rs`: columns matched by their ids, so a renamed or
/// re-added column is read as what it is).
fn current_columns(
    layout: &TableLayout,
    version: u32,
    batch: &RecordBatch,
    delete: bool,
) -> std::result::Result<Vec<ArrayRef>, String> {
    let n = batch.num_rows();
    let older = layout.older_version(version).map_err(|e| e.reason())?;
    let written = older.map_or(layout, |o| o.layout.as_ref());
    let schema = written.schema();
    let columns: Vec<ArrayRef> = if delete {
        // Key rows: the key columns by their name at that version, nulls
        // elsewhere.
        schema
            .fields()
            .iter()
            .enumerate()
            .map(|(c, f)| match batch.column_by_name(f.name()) {
                Some(col) if written.primary_key().contains(&c) && col.data_type() == f.data_type() => {
                    Ok(col.clone())
                }
                Some(_) if written.primary_key().contains(&c) => {
                    Err(format!("a deleted key's column {} of another type", f.name()))
                }
                None if written.primary_key().contains(&c) => {
                    Err(format!("a deleted key without column {}", f.name()))
                }
                _ => Ok(arrow_array::new_null_array(f.data_type(), n)),
            })
            .collect::<std::result::Result<_, String>>()?
    } else {
        if batch.num_columns() != schema.fields().len()
            || batch.columns().iter().zip(schema.fields()).any(|(c, f)| c.data_type() != f.data_type())
        {
            return Err(format!("rows that are not of the table's schema version {version}"));
        }
        batch.columns().to_vec()
    };
    match older {
        None => Ok(columns),
        Some(older) => older.map().adapt(layout, &columns, n).map_err(|e| e.reason()),
    }
}

/// One record of a WAL read forwards from an offset.
enum WalRecord {
    /// A data record's offset and payload.
    Data(u64, Vec<u8>),
    /// A seal: the end of a commit group, with its time if timed.
    Seal(Option<u64>),
    /// The file's end, or a record cut short by it (a torn tail, or an
    /// append still under way).
    End,
    /// A record that fails its checks before the file's end, at this
    /// offset.
    Damaged(u64),
}

/// Bytes a WAL is read in at a time: a resumed feed reads from near its
/// point on, not the whole file.
const WAL_CHUNK_BYTES: usize = 1 << 20;

/// Reads a WAL's records forwards in chunks (`log/format.rs`).
struct WalRecords<'f> {
    file: &'f dyn crate::io::RandomAccessFile,
    len: u64,
    /// Bytes read, from file offset `at`; `pos` is the next record's
    /// place in them.
    buf: Vec<u8>,
    at: u64,
    pos: usize,
}

impl<'f> WalRecords<'f> {
    fn new(file: &'f dyn crate::io::RandomAccessFile, start: u64) -> WalRecords<'f> {
        let len = file.len();
        WalRecords { file, len, buf: Vec::new(), at: start.min(len), pos: 0 }
    }

    /// Makes `need` bytes from `pos` on available; false at the file's end.
    fn fill(&mut self, need: usize) -> Result<bool> {
        if self.buf.len() - self.pos >= need {
            return Ok(true);
        }
        let offset = self.at + self.pos as u64;
        let left = self.len.saturating_sub(offset);
        if (left as usize) < need {
            return Ok(false);
        }
        let size = usize::try_from(left).unwrap_or(usize::MAX).min(need.max(WAL_CHUNK_BYTES));
        self.buf = self.file.read_at(offset, size)?;
        self.at = offset;
        self.pos = 0;
        Ok(self.buf.len() >= need)
    }

    fn next(&mut self) -> Result<WalRecord> {
        let offset = self.at + self.pos as u64;
        if !self.fill(HEADER_BYTES)? {
            return Ok(if offset >= self.len { WalRecord::End } else { WalRecord::Damaged(offset) });
        }
        let Some(header) = parse_header(&self.buf[self.pos..]) else {
            return Ok(WalRecord::Damaged(offset));
        };
        if !self.fill(HEADER_BYTES + header.len)? {
            return Ok(WalRecord::Damaged(offset));
        }
        let start = self.pos + HEADER_BYTES;
        let payload = &self.buf[start..start + header.len];
        if mask_crc(crc32c::crc32c(payload)) != header.payload_crc {
            return Ok(WalRecord::Damaged(offset));
        }
        self.pos = start + header.len;
        Ok(match crate::log::format::payload_kind(payload) {
            crate::log::format::Payload::Data => WalRecord::Data(offset, payload.to_vec()),
            crate::log::format::Payload::Seal => WalRecord::Seal(None),
            crate::log::format::Payload::TimedSeal(ms) => WalRecord::Seal(Some(ms)),
        })
    }
}
