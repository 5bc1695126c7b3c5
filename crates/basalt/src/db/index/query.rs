//! Reading through an index: the entries of a predicate's key range, and
//! the rows they point at. A lookup whose columns the entries hold
//! (indexed, primary-key and included columns) reads the index alone;
//! otherwise it fetches the rows by primary key, in key order (neighbours
//! share blocks), and hands them out in index order.

use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt32Array};
use arrow_schema::SchemaRef;
use bytes::Bytes;

use crate::catalog::IndexDef;
use crate::codec::internal::SeqNo;
use crate::codec::key::{KeyValue, prefix_successor};
use crate::db::read::iter::{Direction, KeyRange, RangeReader};
use crate::db::read::row_view::RowRef;
use crate::db::{read::snapshot::Snapshot, state::handles::Table, state::versions::SuperVersion};
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::cell::Span;
use crate::row::decode::{ColumnBuilder, builders_for};

/// Which entries of an index a query reads. Values are the indexed
/// columns' in key order; `None` stands for null (only in a nullable
/// column). Values compare as keys do: `-0.0` equals `0.0` and every NaN
/// is one value above `+inf`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum IndexPredicate<'a> {
    /// Every indexed column equals its value.
    Eq(Vec<Option<KeyValue<'a>>>),
    /// The leading indexed columns equal these values.
    Prefix(Vec<Option<KeyValue<'a>>>),
    /// The tuple of the leading indexed columns lies between the bounds.
    /// A bound may name fewer columns than the other: `Included(prefix)`
    /// as the upper bound takes every entry starting with it,
    /// `Excluded(prefix)` as the lower bound skips them all.
    Range(Bound<Vec<Option<KeyValue<'a>>>>, Bound<Vec<Option<KeyValue<'a>>>>),
}

/// Answers with at least this many rows fetch them in primary-key order
/// (neighbours share blocks) and reorder them with one `take`; fewer are
/// fetched in index order, as they come: a few rows rarely share a block,
/// and the reordering cost more than the order saved (measured, issue 37).
const FETCH_IN_KEY_ORDER_MIN: usize = 64;

crate::options::option_struct! {
/// How a lookup reads ([`Table::lookup`]).
#[derive(Debug, Clone, Default)]
pub struct LookupOptions<'a> {
    /// Columns to return, by name, in this order (`None`: all).
    pub projection: Option<Vec<String>>,
    /// Read as of this snapshot (`None`: now).
    pub snapshot: Option<&'a Snapshot>,
    /// Return at most this many rows.
    pub limit: Option<usize>,
    /// Descending index order.
    pub reverse: bool,
}
}

/// The schema indexes and schema of the columns `names` of `schema` (all
/// of them without names).
fn projection(schema: &SchemaRef, names: Option<&[String]>) -> Result<(Vec<usize>, SchemaRef)> {
    let Some(names) = names else {
        return Ok(((0..schema.fields().len()).collect(), schema.clone()));
    };
    let columns = names
        .iter()
        .map(|n| schema.index_of(n).map_err(|_| Error::InvalidArgument(format!("no column {n}"))))
        .collect::<Result<Vec<_>>>()?;
    let projected = schema.project(&columns).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    Ok((columns, Arc::new(projected)))
}

/// An index and the moment it is read at.
pub(crate) struct IndexRead {
    pub index: TreeId,
    pub def: IndexDef,
    pub seqno: SeqNo,
    pub sv: Arc<SuperVersion>,
}

impl Table {
    /// [`Table::lookup`]'s work.
    #[expect(clippy::needless_pass_by_value, reason = "built inline by the caller, as ScanOptions are")]
    pub(crate) fn lookup_rows(
        &self,
        index: &str,
        predicate: IndexPredicate<'_>,
        opts: LookupOptions<'_>,
    ) -> Result<RecordBatch> {
        let read = self.index_read(index, opts.snapshot)?;
        let range = predicate_range(&read.def, &predicate)?;
        let (projection, schema) = projection(self.layout_in(&read.sv).schema(), opts.projection.as_deref())?;
        let limit = opts.limit.unwrap_or(usize::MAX);
        let mut entries = self.open_entries(&read, &predicate, range, opts.reverse)?;
        let layout = self.layout_in(&read.sv).clone();
        let mut builders = builders_for(&layout);
        if projection.iter().all(|&c| read.def.layout.covers(c)) {
            let mut rows = 0;
            while rows < limit
                && let Some((key, value)) = entries.next_entry()?
            {
                read.def
                    .layout
                    .decode_entry(&key, &value, &mut builders)
                    .map_err(|e| self.bad_entry(index, &e))?;
                rows += 1;
            }
            self.inner().counters.record_index_entries(rows as u64);
            let arrays = finish(builders, &projection)?;
            return batch(schema, arrays, rows);
        }
        let mut keys: Vec<Bytes> = Vec::new();
        while keys.len() < limit
            && let Some((key, _)) = entries.next_entry()?
        {
            let pk = read.def.layout.user_key(&key).map_err(|e| self.bad_entry(index, &e))?;
            keys.push(key.slice_ref(pk));
        }
        self.inner().counters.record_index_entries(keys.len() as u64);
        self.inner().counters.record_table_rows(keys.len() as u64);
        if keys.len() < FETCH_IN_KEY_ORDER_MIN {
            let mut rows = 0;
            for key in &keys {
                rows += usize::from(self.fetch_row(&read, key, &mut builders, index)?);
            }
            let arrays = finish(builders, &projection)?;
            return batch(schema, arrays, rows);
        }
        // Fetch in primary-key order, then hand out in index order.
        let mut order: Vec<u32> = (0..keys.len() as u32).collect();
        order.sort_by(|&a, &b| keys[a as usize].cmp(&keys[b as usize]));
        let mut position = vec![None; keys.len()];
        let mut fetched = 0u32;
        for &k in &order {
            if self.fetch_row(&read, &keys[k as usize], &mut builders, index)? {
                position[k as usize] = Some(fetched);
                fetched += 1;
            }
        }
        let arrays = finish(builders, &projection)?;
        let take: UInt32Array = position.into_iter().flatten().map(Some).collect();
        let arrays = arrays
            .iter()
            .map(|a| arrow_select::take::take(a, &take, None))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::InvalidArgument(format!("ordering lookup rows: {e}")))?;
        batch(schema, arrays, take.len())
    }

    /// [`Table::lookup_with`]'s work: each row a view, in index order. A
    /// lookup whose projection the entries cover reads the index alone and
    /// views the entries' values (columns the entries lack are not read).
    pub(crate) fn lookup_views<E: From<Error>>(
        &self,
        index: &str,
        predicate: &IndexPredicate<'_>,
        opts: &LookupOptions<'_>,
        f: &mut dyn FnMut(RowRef<'_>) -> Result<(), E>,
    ) -> Result<usize, E> {
        let read = self.index_read(index, opts.snapshot)?;
        let range = predicate_range(&read.def, predicate)?;
        // An equality's entries all start with its encoded values, which
        // name every indexed column: the primary key is what follows.
        let eq_prefix = match (predicate, &range.0) {
            (IndexPredicate::Eq(_), Bound::Included(prefix)) => Some(prefix.len()),
            _ => None,
        };
        let layout = self.layout_in(&read.sv).clone();
        let (projection, _) = projection(layout.schema(), opts.projection.as_deref())?;
        let limit = opts.limit.unwrap_or(usize::MAX);
        let mut entries = self.open_entries(&read, predicate, range, opts.reverse)?;
        let mut rows = 0;
        if projection.iter().all(|&c| read.def.layout.covers(c)) {
            let mut bytes = Vec::new();
            let mut spans = vec![Span::Absent; layout.columns().len()];
            // A float of the key is there in its canonical form only (not
            // its -0.0 or NaN payload): not read.
            let covered: Vec<bool> = (0..spans.len()).map(|c| read.def.layout.covers(c)).collect();
            while rows < limit
                && let Some((key, value)) = entries.next_entry()?
            {
                bytes.clear();
                spans.fill(Span::Absent);
                read.def
                    .layout
                    .entry_values(&key, &value, |i, v| {
                        if !covered[i] {
                            return;
                        }
                        spans[i] = v.map_or(Span::Null, |v| {
                            let start = bytes.len();
                            bytes.extend_from_slice(v);
                            // An entry's key and value are each bounded by
                            // `key_bytes_max`/`value_bytes_max` (u32).
                            Span::At(start as u32, bytes.len() as u32)
                        });
                    })
                    .map_err(|e| self.bad_entry(index, &e))?;
                rows += 1;
                f(RowRef::over_spans(&layout, &bytes, &[], &spans))?;
            }
            self.inner().counters.record_index_entries(rows as u64);
            return Ok(rows);
        }
        let mut keys: Vec<Bytes> = Vec::new();
        while keys.len() < limit
            && let Some((key, _)) = entries.next_entry()?
        {
            let pk = match eq_prefix {
                Some(n) if n <= key.len() => &key[n..],
                _ => read.def.layout.user_key(&key).map_err(|e| self.bad_entry(index, &e))?,
            };
            debug_assert_eq!(Some(pk), read.def.layout.user_key(&key).ok());
            keys.push(key.slice_ref(pk));
        }
        self.inner().counters.record_index_entries(keys.len() as u64);
        self.inner().counters.record_table_rows(keys.len() as u64);
        let expires = read.sv.version.catalog.ttl(self.tree()).is_some();
        if keys.len() < FETCH_IN_KEY_ORDER_MIN {
            let mut rows = 0;
            for key in &keys {
                match self.view_at(key, read.seqno, &read.sv, &mut *f)? {
                    Some(done) => {
                        done?;
                        rows += 1;
                    }
                    // Expired since its entry was read.
                    None if expires => {}
                    None => return Err(self.missing_row(index).into()),
                }
            }
            return Ok(rows);
        }
        // Many rows: fetched in primary-key order (neighbours share blocks
        // and index lines) and copied into one buffer, then viewed in
        // index order, with no allocation per row.
        let width = layout.columns().len();
        let mut order: Vec<u32> = (0..keys.len() as u32).collect();
        order.sort_by(|&a, &b| keys[a as usize].cmp(&keys[b as usize]));
        let mut bytes = Vec::new();
        let mut spans = vec![Span::Absent; keys.len() * width];
        let mut present = vec![true; keys.len()];
        for &k in &order {
            let k = k as usize;
            let copied = self.view_at(&keys[k], read.seqno, &read.sv, |row| {
                row.copy_into(&mut bytes, &mut spans[k * width..(k + 1) * width])
            })?;
            match copied {
                Some(done) => done?,
                // Expired since its entry was read.
                None if expires => present[k] = false,
                None => return Err(self.missing_row(index).into()),
            }
        }
        let mut rows = 0;
        for (row, _) in spans.chunks_exact(width).zip(&present).filter(|(_, p)| **p) {
            f(RowRef::over_spans(&layout, &bytes, &[], row))?;
            rows += 1;
        }
        Ok(rows)
    }

    /// [`Table::count_opt`]'s work.
    #[expect(clippy::needless_pass_by_value, reason = "built inline by the caller, as ScanOptions are")]
    pub(crate) fn count_entries_at(
        &self,
        index: &str,
        predicate: IndexPredicate<'_>,
        snapshot: Option<&Snapshot>,
    ) -> Result<u64> {
        let read = self.index_read(index, snapshot)?;
        let range = predicate_range(&read.def, &predicate)?;
        let mut entries = self.open_entries(&read, &predicate, range, false)?;
        let n = entries.count_rest()?;
        self.inner().counters.record_index_entries(n);
        Ok(n)
    }

    /// The entries of `range`, the range of `predicate`, in `read`'s
    /// index: an equality's or a prefix's only from the files whose filter
    /// may hold its values ([`predicate_prefix`]).
    fn open_entries(
        &self,
        read: &IndexRead,
        predicate: &IndexPredicate<'_>,
        range: KeyRange,
        reverse: bool,
    ) -> Result<RangeReader> {
        let prefix = predicate_prefix(predicate, &range);
        let direction = if reverse { Direction::Reverse } else { Direction::Forward };
        RangeReader::open_prefixed(
            self.inner(),
            &read.sv,
            read.seqno,
            read.index,
            range,
            direction,
            prefix.as_deref(),
        )
    }

    /// The ready index `name` and the moment to read it at.
    pub(crate) fn index_read(&self, name: &str, snapshot: Option<&Snapshot>) -> Result<IndexRead> {
        let inner = self.inner();
        inner.check_open()?;
        let (seqno, sv) = inner.read_view(inner.snapshot_seqno(snapshot, self.tree())?);
        if sv.version.tree(self.tree()).is_none() {
            return Err(Error::InvalidArgument(format!("table {} was dropped", self.name())));
        }
        let (index, def) = self.find_index(&sv.version.catalog, name)?;
        if !inner.index_answers_at(&sv.version.catalog, index, seqno) {
            return Err(Error::InvalidArgument(format!(
                "index {name} was created after the snapshot read at seqno {seqno}"
            )));
        }
        Ok(IndexRead { index, def, seqno, sv })
    }

    /// Appends the row of `user_key` to `builders`, returning true; an
    /// index entry whose row is missing is damage, unless the table has a
    /// time to live: the row expired after its entry was read (an entry
    /// expires with its row, but each read takes the expiry floor of its
    /// moment, and the row is read later), and false is returned.
    pub(crate) fn fetch_row(
        &self,
        read: &IndexRead,
        user_key: &[u8],
        builders: &mut [ColumnBuilder],
        index: &str,
    ) -> Result<bool> {
        if self.push_row_at(user_key, read.seqno, &read.sv, builders)? {
            return Ok(true);
        }
        if read.sv.version.catalog.ttl(self.tree()).is_some() {
            return Ok(false);
        }
        Err(self.missing_row(index))
    }

    /// An entry of `index` that names no row, as damage naming the index.
    fn missing_row(&self, index: &str) -> Error {
        Error::corruption(
            format!("index {index} of table {}", self.name()),
            0,
            "an entry names a row the table does not hold",
        )
    }

    /// An index entry that does not decode, as damage naming the index.
    fn bad_entry(&self, index: &str, e: &Error) -> Error {
        Error::corruption(
            format!("index {index} of table {}", self.name()),
            0,
            format!("entry: {}", e.reason()),
        )
    }
}

/// The index-key range of a predicate, its values checked against the
/// indexed columns.
pub(crate) fn predicate_range(def: &IndexDef, predicate: &IndexPredicate<'_>) -> Result<KeyRange> {
    let layout = &def.layout;
    let successor = |k: Vec<u8>| prefix_successor(&k).map_or(Bound::Unbounded, Bound::Excluded);
    Ok(match predicate {
        IndexPredicate::Eq(values) if values.len() != layout.columns().len() => {
            return Err(Error::InvalidArgument(format!(
                "an equality names every indexed column: {} values for {} columns",
                values.len(),
                layout.columns().len()
            )));
        }
        IndexPredicate::Eq(values) | IndexPredicate::Prefix(values) => {
            let prefix = layout.encode_values(values)?;
            (Bound::Included(prefix.clone()), successor(prefix))
        }
        IndexPredicate::Range(lower, upper) => {
            let lower = match lower {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(v) => Bound::Included(layout.encode_values(v)?),
                Bound::Excluded(v) => match successor(layout.encode_values(v)?) {
                    Bound::Excluded(s) => Bound::Included(s),
                    // Nothing sorts after every extension of the bound.
                    _ => Bound::Excluded(vec![0xff; 1 << 12]),
                },
            };
            let upper = match upper {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(v) => successor(layout.encode_values(v)?),
                Bound::Excluded(v) => Bound::Excluded(layout.encode_values(v)?),
            };
            (lower, upper)
        }
    })
}

/// The prefix every entry an equality or prefix predicate selects starts
/// with: its encoded values, whole leading parts of the index key, which
/// SST filters hold (`sst/writer.rs`). `None` for a range, and for a
/// prefix of no values.
fn predicate_prefix(predicate: &IndexPredicate<'_>, range: &KeyRange) -> Option<Vec<u8>> {
    match (predicate, &range.0) {
        (IndexPredicate::Eq(_) | IndexPredicate::Prefix(_), Bound::Included(prefix))
            if !prefix.is_empty() =>
        {
            Some(prefix.clone())
        }
        _ => None,
    }
}

/// The projected builders' arrays (a column projected twice is built once).
fn finish(builders: Vec<ColumnBuilder>, projection: &[usize]) -> Result<Vec<ArrayRef>> {
    let mut unbuilt: Vec<Option<ColumnBuilder>> = builders.into_iter().map(Some).collect();
    let mut built: Vec<Option<ArrayRef>> = vec![None; unbuilt.len()];
    projection
        .iter()
        .map(|&c| {
            if let Some(array) = &built[c] {
                return Ok(array.clone());
            }
            let array = unbuilt[c]
                .take()
                .ok_or_else(|| Error::InvalidArgument(format!("no column {c} to project")))?
                .into_array()?;
            built[c] = Some(array.clone());
            Ok(array)
        })
        .collect()
}

/// A batch of `rows` rows (a batch of no columns still has a length).
fn batch(schema: SchemaRef, arrays: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
    let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema, arrays, &opts)
        .map_err(|e| Error::InvalidArgument(format!("lookup rows: {e}")))
}
