//! Choosing an index for a filtered scan. A filter whose predicates pin
//! the leading columns of a ready index (equalities on its first columns,
//! or a range on its first column) can be answered by fetching the rows
//! the index names instead of reading the whole key range. The choice is
//! made by counting: the candidate index's entries are counted up to a cap
//! (a fraction of the table's rows, below which fetching by key beats
//! reading every row) as a count reads them — whole files from their
//! properties, stretches of a block by a binary search, no key decoded —
//! and stops past the cap; only an index whose matches fit under it is
//! read for its keys. The filter is applied to the fetched
//! rows all the same, so the answer is the scan's whatever the index
//! covers (a float index treats `-0.0` as `0.0`: its candidates are a
//! superset).

use std::ops::Bound;
use std::sync::Arc;

use arrow_array::Array;
use arrow_schema::DataType;
use bytes::Bytes;

use super::query::{IndexPredicate, IndexRead, predicate_range};
use crate::codec::internal::SeqNo;
use crate::codec::key::KeyValue;
use crate::db::read::iter::{Direction, RangeReader};
use crate::db::read::scan::KeyedRows;
use crate::db::{state::handles::Table, state::versions::SuperVersion};
use crate::error::Result;
use crate::row::decode::ColumnBuilder;
use crate::row::encode::{key_value_of, value_bytes};
use crate::row::filter::{CmpOp, Filter, Predicate};

/// Fewest entries an index may return and still be chosen, whatever the
/// table's size: below it, fetching rows costs less than opening a scan.
const INDEX_ROWS_FLOOR: u64 = 1024;

/// An index is chosen for at most one row in this many of the table's: a
/// row fetched by key costs about as much as this many rows scanned.
/// Measured on issue 65's 3M-row table (release build, `db.sql`, medians
/// of 5): a row fetched through the `delay` index 2.2 µs, a row scanned
/// with the filter 7 ns (21 ms for 3M), so the index wins below about
/// 0.3 % of the rows. It was 8 (12.5 %): at 1 %, 2 % and 5 % of the rows
/// the index took 54, 114 and 220 ms where the scan took 21, 23 and 25.
const ROWS_PER_INDEX_ROW: u64 = 256;

/// An index plan: the index and the primary keys of its candidate rows,
/// in key order.
pub(crate) struct IndexPlan {
    pub name: String,
    pub read: IndexRead,
    pub keys: Vec<Bytes>,
}

impl KeyedRows for IndexPlan {
    fn index(&self) -> &str {
        &self.name
    }

    fn keys(&self) -> &[Bytes] {
        &self.keys
    }

    fn retain(&mut self, keep: &mut dyn FnMut(&[u8]) -> bool) {
        self.keys.retain(|k| keep(k));
    }

    fn fetch(&self, table: &Table, key: &[u8], builders: &mut [ColumnBuilder]) -> Result<bool> {
        table.fetch_row(&self.read, key, builders, &self.name)
    }
}

impl Table {
    /// The index a scan with `filter` should use at `seqno` in `sv`, if
    /// one is estimated to read fewer rows than the scan.
    pub(crate) fn plan_index(
        &self,
        filter: &Filter,
        seqno: SeqNo,
        sv: &Arc<SuperVersion>,
    ) -> Result<Option<IndexPlan>> {
        let catalog = &sv.version.catalog;
        if !catalog.has_indexes() {
            return Ok(None);
        }
        let table_rows: u64 =
            sv.version.tree(self.tree()).map_or(0, |t| t.levels.iter().flatten().map(|f| f.entries).sum());
        let cap = INDEX_ROWS_FLOOR.max(table_rows / ROWS_PER_INDEX_ROW);
        let mut best: Option<IndexPlan> = None;
        for (index, tree, def) in catalog.indexes_of(self.tree()) {
            if def.building || !self.inner().index_answers_at(catalog, index, seqno) {
                continue;
            }
            let mut scratch = Vec::new();
            let Some(predicate) = index_predicate(&def.layout, filter, &mut scratch) else { continue };
            let range = predicate_range(def, &predicate)?;
            let limit = best.as_ref().map_or(cap, |b| b.keys.len() as u64);
            // Counted first, as a count is (whole files from their
            // properties, runs of a block by a binary search, no key
            // decoded): where the scan wins, nothing more is read.
            let mut counting =
                RangeReader::open(self.inner(), sv, seqno, index, range.clone(), Direction::Forward)?;
            let Some(count) = counting.count_up_to(limit)? else { continue };
            let mut entries = RangeReader::open(self.inner(), sv, seqno, index, range, Direction::Forward)?;
            let mut keys = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
            let mut too_many = false;
            while let Some((key, _)) = entries.next_entry()? {
                if keys.len() as u64 >= limit {
                    too_many = true;
                    break;
                }
                keys.push(key.slice_ref(def.layout.user_key(&key)?));
            }
            self.inner().counters.record_index_entries(keys.len() as u64 + u64::from(too_many));
            if too_many {
                continue;
            }
            keys.sort_unstable();
            let read = IndexRead { index, def: def.clone(), seqno, sv: sv.clone() };
            best = Some(IndexPlan { name: tree.name.clone(), read, keys });
        }
        Ok(best)
    }
}

/// The index predicate a filter implies for an index on `columns`:
/// equalities on its leading columns, else a range on its first one (not
/// on a float: `-0.0` and NaN order differently in Arrow's comparisons).
fn index_predicate<'s>(
    layout: &crate::row::index::IndexLayout,
    filter: &Filter,
    scratch: &'s mut Vec<Vec<u8>>,
) -> Option<IndexPredicate<'s>> {
    // The table's layout the index was read with (the scan's super
    // version), not the handle's now: columns may have changed since.
    let table_layout = layout.table();
    let schema = table_layout.schema();
    let on = |column: usize, ops: &[CmpOp]| -> Vec<&Predicate> {
        let name = schema.field(column).name();
        filter.predicates.iter().filter(|p| &p.column == name && ops.contains(&p.op)).collect()
    };
    let literal = |p: &Predicate| -> Option<Vec<u8>> {
        let column = schema.index_of(&p.column).ok()?;
        let width = table_layout.columns()[column].width;
        if p.literal.len() != 1 || p.literal.is_null(0) {
            return None;
        }
        let mut bytes = Vec::new();
        value_bytes(&p.literal, width, 0, &mut bytes).ok()?;
        Some(bytes)
    };
    // Literal bytes first (the key values borrow them).
    let mut eq_columns = Vec::new();
    for &c in layout.columns() {
        let Some(p) = on(c, &[CmpOp::Eq]).into_iter().next() else { break };
        scratch.push(literal(p)?);
        eq_columns.push(c);
    }
    let first = layout.columns()[0];
    let mut bounds = (None, None);
    if eq_columns.is_empty() {
        let float = matches!(schema.field(first).data_type(), DataType::Float32 | DataType::Float64);
        if float {
            return None;
        }
        for p in on(first, &[CmpOp::Gt, CmpOp::GtEq, CmpOp::Lt, CmpOp::LtEq]) {
            let at = scratch.len();
            scratch.push(literal(p)?);
            match p.op {
                CmpOp::Gt | CmpOp::GtEq => bounds.0 = Some((at, p.op)),
                _ => bounds.1 = Some((at, p.op)),
            }
        }
        if bounds == (None, None) {
            return None;
        }
    }
    let scratch: &'s Vec<Vec<u8>> = scratch;
    let value = |at: usize, column: usize| Some(key_value_of(schema.field(column).data_type(), &scratch[at]));
    if !eq_columns.is_empty() {
        let values: Vec<Option<KeyValue<'s>>> =
            eq_columns.iter().enumerate().map(|(at, &c)| value(at, c)).collect();
        return Some(IndexPredicate::Prefix(values));
    }
    let bound = |b: Option<(usize, CmpOp)>| match b {
        None => Bound::Unbounded,
        Some((at, CmpOp::Gt | CmpOp::Lt)) => Bound::Excluded(vec![value(at, first)]),
        Some((at, _)) => Bound::Included(vec![value(at, first)]),
    };
    Some(IndexPredicate::Range(bound(bounds.0), bound(bounds.1)))
}
