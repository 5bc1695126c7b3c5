//! What a query planner asks of a table before it reads: key ranges that
//! split a scan into parts of similar size on disk (so a query engine can
//! scan them on several cores), and estimates of the table's rows and
//! bytes (so it can order joins). Both come from the SSTs' metadata alone:
//! no data block is read. And the exact count of a range's rows, which
//! reads blocks only where sources overlap.

use std::ops::Bound;

use arrow_schema::DataType;

use std::sync::Arc;

use crate::codec::internal::SeqNo;
use crate::codec::key::{self, KeyValue, OwnedKeyValue};
use crate::db::read::cursor::{KeyRange, covers_file, file_overlaps, in_range, span_overlaps};
use crate::db::read::iter::{Direction, RangeReader};
use crate::db::read::scan::{KeyValueRange, encode_range};
use crate::db::read::ttl::NOTHING_EXPIRED;
use crate::db::{read::snapshot::Snapshot, state::handles::Table, state::versions::SuperVersion};
use crate::error::{Error, Result};
use crate::files;
use crate::memtable::{MemCursor, Memtable};
use crate::row::layout::key_type_of;
use crate::row::zone::{ColumnZone, zone_value};
use crate::version::FileMeta;

/// A key range of owned key values (see [`KeyValueRange`]).
pub type OwnedKeyValueRange = (Bound<Vec<OwnedKeyValue>>, Bound<Vec<OwnedKeyValue>>);

/// Sizes of a table as its SSTs and memtables record them. Estimates: an
/// overwritten or deleted row is counted once per version still stored,
/// and a memtable holding any of the table's rows counts all its entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableEstimate {
    /// Row versions in SSTs and memtables.
    pub rows: u64,
    /// Bytes of the table's SSTs, and of its memtable entries.
    pub bytes: u64,
    /// The rows visible at the read, where metadata alone tells them
    /// exactly: no memtable holds any of the table's rows, no two SSTs hold
    /// a key in common, and every SST holds puts only, none newer than the
    /// read, and records its distinct keys (format version 5 on). `None`
    /// otherwise ([`Table::count_rows`] counts exactly in every case).
    pub exact_rows: Option<u64>,
}

/// What a table's SST zone maps record of one column: estimates for a
/// query planner, from metadata alone.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ColumnEstimate {
    /// Nulls stored, counting each deleted row and each stored version of
    /// an overwritten row once; `None` when unknown.
    pub null_count: Option<u64>,
    /// The smallest value stored (possibly one a deleted or overwritten row
    /// had: no live value is smaller); `None` when unknown. Unknown for
    /// decimals, for values longer than 64 bytes, for a float column whose
    /// smallest value is a NaN, and for a column some block holds only
    /// nulls of (a zone map does not tell those from long values).
    pub min: Option<OwnedKeyValue>,
    /// The largest value stored, as `min`.
    pub max: Option<OwnedKeyValue>,
}

impl Table {
    /// [`Table::split_range`]'s work.
    pub(crate) fn split_range_by_files(
        &self,
        range: &KeyValueRange<'_>,
        parts: usize,
    ) -> Result<Vec<OwnedKeyValueRange>> {
        self.inner().check_open()?;
        let encoded = encode_range(self, range)?;
        let whole = (owned_bound(&range.0), owned_bound(&range.1));
        if parts <= 1 {
            return Ok(vec![whole]);
        }
        let cuts = self.cut_points(&encoded, parts)?;
        if cuts.is_empty() {
            return Ok(vec![whole]);
        }
        let mut out = Vec::with_capacity(cuts.len() + 1);
        let mut lower = whole.0;
        for cut in cuts {
            out.push((lower, Bound::Excluded(cut.clone())));
            lower = Bound::Included(cut);
        }
        out.push((lower, whole.1));
        Ok(out)
    }

    /// [`Table::split_points`]'s work.
    pub(crate) fn split_points_by_files(&self, n: usize) -> Result<Vec<Vec<OwnedKeyValue>>> {
        self.inner().check_open()?;
        if n <= 1 {
            return Ok(Vec::new());
        }
        self.cut_points(&(Bound::Unbounded, Bound::Unbounded), n)
    }

    /// Up to `parts - 1` whole keys strictly inside `range`, ascending, that
    /// cut the SST bytes overlapping it into parts of similar size.
    fn cut_points(&self, range: &KeyRange, parts: usize) -> Result<Vec<Vec<OwnedKeyValue>>> {
        let (_, sv) = self.inner().read_view(None);
        let Some(tree) = sv.version.tree(self.tree()) else {
            return Err(Error::InvalidArgument(format!("table {} was dropped", self.name())));
        };
        // Each file's bytes are charged to the key it starts at: bytes before
        // the first cut belong to files starting at or below the lower bound.
        let mut starts: Vec<(&[u8], u64, u64)> = Vec::new();
        let mut below = 0u64;
        for (_, file) in tree.all_files() {
            let start = file.smallest.user_key.as_ref();
            let end = file.largest.user_key.as_ref();
            if !span_overlaps(range, start, end) {
                continue;
            }
            if in_range(range, start) && !is_lower_bound(range, start) {
                starts.push((start, file.size, file.number));
            } else {
                below += file.size;
            }
        }
        starts.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let total = below + starts.iter().map(|s| s.1).sum::<u64>();
        let share = total.div_ceil(parts as u64).max(1);
        let mut cuts: Vec<(&[u8], u64)> = Vec::new();
        let mut filled = below;
        for (start, size, number) in starts {
            // Cut where a part is full, once per distinct start key.
            let full = filled >= share * (cuts.len() as u64 + 1);
            if full && cuts.last().is_none_or(|c| c.0 != start) && cuts.len() + 1 < parts {
                cuts.push((start, number));
            }
            filled += size;
        }
        cuts.into_iter().map(|(k, number)| self.decode_user_key(k, Some(number))).collect()
    }

    /// [`Table::nth_last_key`]'s work: the range read backwards, `n` rows.
    pub(crate) fn nth_last_key_at(
        &self,
        range: &KeyValueRange<'_>,
        n: u64,
        snapshot: Option<&Snapshot>,
    ) -> Result<Option<Vec<OwnedKeyValue>>> {
        self.inner().check_open()?;
        let range = encode_range(self, range)?;
        if n == 0 || empty_range(&range) {
            return Ok(None);
        }
        let (seqno, sv) = self.inner().read_view(self.inner().snapshot_seqno(snapshot, self.tree())?);
        if sv.version.tree(self.tree()).is_none() {
            return Err(Error::InvalidArgument(format!("table {} was dropped", self.name())));
        }
        let mut rows = RangeReader::open(self.inner(), &sv, seqno, self.tree(), range, Direction::Reverse)?;
        let mut last = None;
        for _ in 0..n {
            let Some((key, _)) = rows.next_entry()? else { return Ok(None) };
            last = Some(key);
        }
        last.map(|key| self.decode_user_key(&key, None)).transpose()
    }

    /// The key values of `user_key`, the smallest key of SST `number` of
    /// this table (`None`: a key read from its rows, in no one file).
    fn decode_user_key(&self, user_key: &[u8], number: Option<u64>) -> Result<Vec<OwnedKeyValue>> {
        let layout = self.layout();
        let corrupt = || {
            let what = format!("key {user_key:?} is not a key of table {}", self.name());
            let file =
                number.map_or_else(|| self.inner().dir.clone(), |n| self.inner().dir.join(files::sst(n)));
            Error::corruption(file, 0, what)
        };
        let types = layout
            .primary_key()
            .iter()
            .map(|&i| key_type_of(layout.schema().field(i).data_type()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(corrupt)?;
        if layout.raw_key() {
            return Ok(vec![match types.first() {
                Some(key::KeyType::Str) => {
                    OwnedKeyValue::Str(String::from_utf8(user_key.to_vec()).map_err(|_| corrupt())?)
                }
                _ => OwnedKeyValue::Bytes(user_key.to_vec()),
            }]);
        }
        key::decode(user_key, &types).map_err(|_| corrupt())
    }

    /// [`Table::estimate_opt`]'s work.
    pub(crate) fn estimate_at(&self, snapshot: Option<&Snapshot>) -> Result<TableEstimate> {
        self.inner().check_open()?;
        let (seqno, sv) = self.inner().read_view(self.inner().snapshot_seqno(snapshot, self.tree())?);
        let Some(tree) = sv.version.tree(self.tree()) else {
            return Err(Error::InvalidArgument(format!("table {} was dropped", self.name())));
        };
        let mut estimate = TableEstimate::default();
        for (_, file) in tree.all_files() {
            estimate.rows += file.entries;
            estimate.bytes += file.size;
        }
        // A memtable holding any of the table's rows counts whole: walking
        // its entries of this tree would cost every planned query O(memtable).
        let mut in_memory = false;
        for mem in sv.memtables_holding(self.tree()) {
            estimate.rows += mem.len() as u64;
            estimate.bytes += mem.approximate_bytes() as u64;
            in_memory = true;
        }
        if !in_memory {
            let all = (Bound::Unbounded, Bound::Unbounded);
            let alone = self.files_counted_alone(&sv, seqno, &all)?;
            if alone.len() == tree.all_files().count() {
                estimate.exact_rows = Some(alone.iter().map(|(_, rows)| rows).sum());
            }
        }
        Ok(estimate)
    }

    /// [`Table::count_rows`]'s work.
    pub(crate) fn count_rows_at(
        &self,
        range: &KeyValueRange<'_>,
        snapshot: Option<&Snapshot>,
    ) -> Result<u64> {
        self.inner().check_open()?;
        let range = encode_range(self, range)?;
        let (seqno, sv) = self.inner().read_view(self.inner().snapshot_seqno(snapshot, self.tree())?);
        let Some(tree) = sv.version.tree(self.tree()) else {
            return Err(Error::InvalidArgument(format!("table {} was dropped", self.name())));
        };
        let alone = self.files_counted_alone(&sv, seqno, &range)?;
        let mut rows: u64 = alone.iter().map(|(_, rows)| rows).sum();
        // The keys between those files: read where anything holds them.
        let in_memory = sv.memtables_holding(self.tree()).next().is_some();
        let mut lower = range.0.clone();
        let uppers = alone.iter().map(|(f, _)| Bound::Excluded(f.smallest.user_key.to_vec()));
        for (i, upper) in uppers.chain(std::iter::once(range.1.clone())).enumerate() {
            let gap = (std::mem::replace(&mut lower, Bound::Unbounded), upper);
            if let Some((file, _)) = alone.get(i) {
                lower = Bound::Excluded(file.largest.user_key.to_vec());
            }
            let held = in_memory || tree.all_files().any(|(_, f)| file_overlaps(f, &gap));
            if held && !empty_range(&gap) {
                rows += RangeReader::open(self.inner(), &sv, seqno, self.tree(), gap, Direction::Forward)?
                    .count_rest()?;
            }
        }
        Ok(rows)
    }

    /// The SSTs of the table whose rows in `range` metadata alone counts,
    /// for a read at `seqno`, in key order with their row counts: each lies
    /// inside the range, shares no key with another SST or a memtable, and
    /// holds puts only, none newer than the read, with its distinct keys
    /// recorded (format version 5 on), so that each key's newest version is
    /// a visible put.
    fn files_counted_alone(
        &self,
        sv: &SuperVersion,
        seqno: SeqNo,
        range: &KeyRange,
    ) -> Result<Vec<(Arc<FileMeta>, u64)>> {
        let Some(tree) = sv.version.tree(self.tree()) else { return Ok(Vec::new()) };
        let mut files: Vec<&Arc<FileMeta>> = tree.all_files().map(|(_, f)| f).collect();
        files.sort_unstable_by(|a, b| a.smallest.user_key.cmp(&b.smallest.user_key));
        let mems: Vec<&Arc<Memtable>> = sv.memtables_holding(self.tree()).collect();
        let mut alone = Vec::new();
        let expired = self.inner().expired_through(&sv.version.catalog, self.tree());
        let mut reach: Option<&[u8]> = None;
        for (i, file) in files.iter().enumerate() {
            let (first, last) = (file.smallest.user_key.as_ref(), file.largest.user_key.as_ref());
            let before = reach.is_some_and(|r| r >= first);
            let after = files.get(i + 1).is_some_and(|next| next.smallest.user_key.as_ref() <= last);
            reach = Some(reach.map_or(last, |r| r.max(last)));
            if before || after || !covers_file(range, file) {
                continue;
            }
            let in_memory = mems.iter().any(|m| {
                MemCursor::new((*m).clone(), self.tree(), true, Some((first, u64::MAX)))
                    .key()
                    .is_some_and(|k| k.user_key.as_ref() <= last)
            });
            let reader = self.inner().sst_readers.get(self.tree(), file)?;
            let properties = reader.properties();
            // No delete in the file, no range delete over it, and nothing
            // in it expired.
            let plain = properties.deletions == 0
                && properties.max_seqno <= seqno
                && file.min_seqno > expired
                && sv.range_tombstones(self.tree(), (first, Some(last)), seqno, NOTHING_EXPIRED).is_none();
            if let Some(rows) = properties.distinct_keys.filter(|_| plain && !in_memory) {
                alone.push(((*file).clone(), rows));
            }
        }
        Ok(alone)
    }

    /// [`Table::column_estimates`]'s work.
    pub(crate) fn fold_column_estimates(&self) -> Result<Vec<ColumnEstimate>> {
        self.inner().check_open()?;
        let (_, sv) = self.inner().read_view(None);
        let Some(tree) = sv.version.tree(self.tree()) else {
            return Err(Error::InvalidArgument(format!("table {} was dropped", self.name())));
        };
        // The layout of the same load: its version is compared with the
        // files' below, and its columns index their zones.
        let layout = self.layout_in(&sv);
        let fields = layout.schema().fields();
        let mut out = vec![ColumnEstimate::default(); fields.len()];
        if sv.memtables_holding(self.tree()).next().is_some() {
            return Ok(out);
        }
        // Zones of a file of an older schema version are that version's
        // columns: no estimate until compaction rewrites it.
        if tree.all_files().any(|(_, f)| f.schema_version != layout.version()) {
            return Ok(out);
        }
        let stored = layout.stored();
        let mut columns = vec![ColumnZone::default(); stored.len()];
        let mut nulls_known = true;
        // The raw key column is not stored: its bounds are the files' keys.
        let mut keys: Option<(&[u8], u64, &[u8], u64)> = None;
        for (_, file) in tree.all_files() {
            let (first, last) = (file.smallest.user_key.as_ref(), file.largest.user_key.as_ref());
            keys = Some(match keys {
                Some((lo, lo_file, hi, hi_file)) => {
                    let (lo, lo_file) = if first < lo { (first, file.number) } else { (lo, lo_file) };
                    let (hi, hi_file) = if last > hi { (last, file.number) } else { (hi, hi_file) };
                    (lo, lo_file, hi, hi_file)
                }
                None => (first, file.number, last, file.number),
            });
            let reader = self.inner().sst_readers.get(self.tree(), file)?;
            // Float zones of format versions 1 and 2 are in the key codec's
            // order, not Arrow's: their bounds are not used.
            let floats = reader.float_zones_in_total_order();
            let zones = reader.column_zones();
            if let Some(z) = zones
                && z.len() != stored.len()
            {
                let what = format!("zones of {} columns, the table layout stores {}", z.len(), stored.len());
                return Err(Error::corruption(reader.path(), 0, what));
            }
            for (position, (column, &index)) in columns.iter_mut().zip(stored).enumerate() {
                let float = matches!(fields[index].data_type(), DataType::Float32 | DataType::Float64);
                if let Some(zone) = zones.and_then(|z| z.get(position)) {
                    column.add(zone.null_count, zone.range().filter(|_| floats || !float));
                } else {
                    nulls_known = false;
                    column.add(0, None);
                }
            }
        }
        for (column, &index) in columns.iter().zip(stored) {
            let data_type = fields[index].data_type();
            let estimate = &mut out[index];
            estimate.null_count = nulls_known.then_some(column.null_count);
            if let Some((min, max)) = column.range() {
                estimate.min = zone_value(data_type, min);
                estimate.max = zone_value(data_type, max);
            }
        }
        if layout.raw_key()
            && let Some(&index) = layout.primary_key().first()
        {
            let estimate = &mut out[index];
            estimate.null_count = Some(0);
            if let Some((lo, lo_file, hi, hi_file)) = keys {
                estimate.min = self.decode_user_key(lo, Some(lo_file))?.into_iter().next();
                estimate.max = self.decode_user_key(hi, Some(hi_file))?.into_iter().next();
            }
        }
        Ok(out)
    }
}

/// `range` with its key values owned.
fn owned_bound(bound: &Bound<Vec<KeyValue<'_>>>) -> Bound<Vec<OwnedKeyValue>> {
    let own = |t: &Vec<KeyValue<'_>>| t.iter().map(KeyValue::to_owned_value).collect();
    match bound {
        Bound::Included(t) => Bound::Included(own(t)),
        Bound::Excluded(t) => Bound::Excluded(own(t)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether no key lies in `range` (its lower bound passes its upper).
fn empty_range((lo, hi): &KeyRange) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

/// Whether `key` is the range's included lower bound (no part can start
/// there: the first one already does).
fn is_lower_bound((lo, _): &KeyRange, key: &[u8]) -> bool {
    matches!(lo, Bound::Included(b) if b.as_slice() == key)
}
