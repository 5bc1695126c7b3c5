//! Checking an index against its table: every row of the table has
//! exactly one entry in each of its indexes, the one the write path would
//! have made for it. Both sides are read at one snapshot and folded into
//! an entry count and an order-independent sum of entry hashes, so the
//! check streams in constant memory whatever the table's size: rows come
//! in primary-key order, entries in index order, and a multiset hash
//! compares them without sorting either.

use std::ops::Bound;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::db::read::iter::{Direction, RangeReader};
use crate::db::read::scan::ScanOptions;
use crate::db::state::handles::Table;
use crate::error::{Error, Result};
use crate::row::index::RowValues;

/// What checking one index found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexCheck {
    /// The index.
    pub index: String,
    /// Rows of the table: each should have exactly one entry.
    pub rows: u64,
    /// Entries the index holds.
    pub entries: u64,
    /// Whether the entries are exactly those the rows imply (same count
    /// and the same multiset hash of keys and included values).
    pub consistent: bool,
}

/// Running count and wrapping sum of entry hashes: equal for two
/// multisets of entries (up to a 2^-64 collision), whatever their order.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
struct Fold {
    count: u64,
    sum: u64,
}

impl Fold {
    fn add(&mut self, key: &[u8], value: &[u8]) {
        // The key's length seeds the value's hash so that moving bytes
        // between key and value changes the entry's hash.
        let h = xxh3_64_with_seed(key, 0) ^ xxh3_64_with_seed(value, key.len() as u64).rotate_left(17);
        self.count += 1;
        self.sum = self.sum.wrapping_add(h);
    }
}

impl Table {
    /// Checks every ready index of the table against its rows, at one
    /// snapshot (writes may go on meanwhile).
    pub(crate) fn check_indexes(&self) -> Result<Vec<IndexCheck>> {
        let inner = self.inner();
        inner.check_open()?;
        let snapshot = crate::db::read::snapshot::Snapshot::new(inner.clone());
        let (seqno, sv) = inner.read_view(Some(snapshot.seqno()));
        let indexes: Vec<_> = sv
            .version
            .catalog
            .indexes_of(self.tree())
            .filter(|(_, _, def)| !def.building)
            .map(|(id, tree, def)| (id, tree.name.clone(), def.clone()))
            .collect();
        if indexes.is_empty() {
            return Ok(Vec::new());
        }
        let mut expected = vec![Fold::default(); indexes.len()];
        let layout = self.layout_in(&sv).clone();
        let scan = self.scan(ScanOptions::default().snapshot(Some(&snapshot)))?;
        if scan.layout().version() != layout.version() {
            return Err(Error::Conflict(format!(
                "the columns of table {} changed while its indexes were checked; check again",
                self.name()
            )));
        }
        for batch in scan {
            let rows = crate::row::encode_rows(&layout, &batch?, false)?;
            for (key, row) in &rows.rows {
                let values = RowValues::parse(&layout, key, row)?;
                for ((_, _, def), fold) in indexes.iter().zip(&mut expected) {
                    let entry = def.layout.entry(key, &values);
                    fold.add(&entry.key, &entry.value);
                }
            }
        }
        let mut out = Vec::with_capacity(indexes.len());
        for ((id, name, _), want) in indexes.into_iter().zip(expected) {
            let all = (Bound::Unbounded, Bound::Unbounded);
            let mut reader = RangeReader::open(inner, &sv, seqno, id, all, Direction::Forward)?;
            let mut found = Fold::default();
            while let Some((key, value)) = reader.next_entry()? {
                found.add(&key, &value);
            }
            out.push(IndexCheck {
                index: name,
                rows: want.count,
                entries: found.count,
                consistent: found == want,
            });
        }
        Ok(out)
    }
}
