//! Index upkeep on the write path. The group-commit leader, before it
//! seals a batch, reads the old image of every row the batch writes to an
//! indexed table (at the last committed seqno, plus what earlier batches
//! of the same group wrote) and appends to the batch the index deletes of
//! old entries and puts of new ones: rows and entries share one WAL
//! record, so they are atomic and recovery replays them as they were.
//! Reading the old row on write, rather than validating entries lazily on
//! read, keeps every entry exact, so counts and covering lookups read the
//! index alone (`docs/architecture.md` has the measurement).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use bytes::Bytes;

use crate::catalog::{IndexDef, TreeDef};
use crate::codec::internal::{Kind, SeqNo};
use crate::codec::key::prefix_successor;
use crate::db::read::iter::{Direction, RangeReader};
use crate::db::{state::inner::DbInner, state::versions::SuperVersion};
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::index::{IndexEntry, IndexLayout, RowValues};
use crate::wal::batch::WriteBatch;

/// What a group's earlier batches wrote, which the trees do not hold yet
/// (a group reaches the memtable only after its WAL append).
#[derive(Debug, Default)]
pub(crate) struct GroupOverlay {
    /// (table, user key) → the row written, `None` for a delete.
    rows: HashMap<(TreeId, Bytes), Option<Bytes>>,
    /// Index tree → entry key → whether the entry now exists.
    entries: HashMap<TreeId, BTreeMap<Vec<u8>, bool>>,
}

impl GroupOverlay {
    /// Takes in the changes of a later batch.
    fn absorb(&mut self, later: GroupOverlay) {
        self.rows.extend(later.rows);
        for (tree, entries) in later.entries {
            self.entries.entry(tree).or_default().extend(entries);
        }
    }
}

/// One index change of a batch.
enum IndexOp {
    Put { index: TreeId, key: Vec<u8>, value: Vec<u8> },
    Delete { index: TreeId, key: Vec<u8> },
}

impl IndexOp {
    /// At most the bytes the entry adds to a batch: a tag, three varints
    /// (tree, key and value lengths) and the key and value.
    fn encoded_bytes_max(&self) -> usize {
        const TAG_AND_VARINTS_BYTES_MAX: usize = 1 + 3 * 10;
        TAG_AND_VARINTS_BYTES_MAX
            + match self {
                IndexOp::Put { key, value, .. } => key.len() + value.len(),
                IndexOp::Delete { key, .. } => key.len(),
            }
    }
}

/// A unique index's new entry, checked once the whole batch is known (so a
/// batch that swaps two rows' values is not refused half way).
struct UniqueCheck<'c> {
    index: TreeId,
    tree: &'c TreeDef,
    def: &'c IndexDef,
    entry: IndexEntry,
}

/// What index upkeep gathers for one batch before it is checked and
/// applied: the batch's own overlay, the index changes, the unique entries
/// to check, and the rows of indexes being built it wrote.
#[derive(Default)]
struct BatchUpkeep<'c> {
    mine: GroupOverlay,
    ops: Vec<IndexOp>,
    unique: Vec<UniqueCheck<'c>>,
    touched: Vec<(TreeId, Bytes)>,
}

impl<'c> BatchUpkeep<'c> {
    /// Records what one row's change (from `old` to `new` values; `None`
    /// for absent) does to one index: its old entry deleted, its new one
    /// put (checked against the key limits), a unique one kept for the
    /// check. An index being built may not hold the old entry yet: the row
    /// gets its entry here even when the indexed values did not change
    /// (newer than the one the build installs from its snapshot), and the
    /// build notes it as touched.
    fn change_entry(
        &mut self,
        db: &DbInner,
        (index, tree, def): (TreeId, &'c TreeDef, &'c IndexDef),
        user_key: &Bytes,
        old: Option<&RowValues>,
        new: Option<&RowValues>,
    ) -> Result<()> {
        let old_entry = old.map(|v| def.layout.entry(user_key, v));
        let new_entry = new.map(|v| def.layout.entry(user_key, v));
        if def.building {
            self.touched.push((index, user_key.clone()));
        }
        if old_entry == new_entry && !def.building {
            return Ok(());
        }
        let entries = self.mine.entries.entry(index).or_default();
        if let Some(o) = old_entry
            && new_entry.as_ref().is_none_or(|n| n.key != o.key)
        {
            entries.insert(o.key.clone(), false);
            self.ops.push(IndexOp::Delete { index, key: o.key });
        }
        if let Some(n) = new_entry {
            db.check_index_entry(&tree.name, &n)?;
            entries.insert(n.key.clone(), true);
            self.ops.push(IndexOp::Put { index, key: n.key.clone(), value: n.value.clone() });
            if def.unique && !n.has_null {
                self.unique.push(UniqueCheck { index, tree, def, entry: n });
            }
        }
        Ok(())
    }
}

impl DbInner {
    /// Refuses an entry of index `name` over the limits every write is
    /// held to (`key_bytes_max`, `value_bytes_max`): upkeep and the
    /// backfill of `create_index` both check here.
    pub(crate) fn check_index_entry(&self, name: &str, entry: &IndexEntry) -> Result<()> {
        self.check_entry_limits(name, entry.key.len(), entry.value.len())
    }

    /// [`DbInner::check_index_entry`] on an entry's lengths.
    pub(crate) fn check_entry_limits(&self, name: &str, key_len: usize, value_len: usize) -> Result<()> {
        if key_len > self.opts.key_bytes_max {
            return Err(Error::InvalidArgument(format!(
                "an entry of index {name} takes {key_len} bytes, over key_bytes_max ({})",
                self.opts.key_bytes_max
            )));
        }
        if value_len > self.opts.value_bytes_max {
            return Err(Error::InvalidArgument(format!(
                "an entry of index {name} holds {value_len} bytes of included columns, over value_bytes_max ({})",
                self.opts.value_bytes_max
            )));
        }
        Ok(())
    }

    /// Adds to `batch` the index changes of its table writes, reading old
    /// rows in `sv` at `seqno` under `group`'s earlier writes; on success
    /// `group` takes in this batch's writes. A unique violation (or an
    /// entry over the key limit) rejects the batch and changes nothing.
    /// The caller owns the write path.
    pub(crate) fn add_index_upkeep(
        &self,
        sv: &SuperVersion,
        seqno: SeqNo,
        batch: &mut WriteBatch,
        group: &mut GroupOverlay,
    ) -> Result<()> {
        let catalog = &sv.version.catalog;
        if !catalog.has_indexes() {
            return Ok(());
        }
        #[cfg(feature = "testing")]
        if self.indexes.skip_upkeep.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let mut upkeep = BatchUpkeep::default();
        // In the batch's order: a range delete hides the rows written
        // before it and none written after.
        let mut encoded = batch.encoded_rows().iter();
        for e in batch.entries() {
            let rows = if e.arrow_rows > 0 { encoded.next() } else { None };
            let indexes: Vec<_> = catalog.indexes_of(e.tree).collect();
            let Some(layout) = indexes.first().map(|(_, _, def)| def.layout.table().clone()) else {
                continue;
            };
            let table = e.tree;
            if let Some(end) = e.range_end {
                let range = (
                    Bound::Included(e.key.to_vec()),
                    end.key().map_or(Bound::Unbounded, |k| Bound::Excluded(k.to_vec())),
                );
                for (user_key, old) in
                    self.rows_in_range(sv, seqno, table, range, &layout, &[group, &upkeep.mine])?
                {
                    let old_values = RowValues::parse(&layout, &user_key, &old)?;
                    for &index in &indexes {
                        upkeep.change_entry(self, index, &user_key, Some(&old_values), None)?;
                    }
                    upkeep.mine.rows.insert((table, user_key), None);
                }
                continue;
            }
            let Some(rows) = rows else { continue };
            for (user_key, row) in &rows.rows {
                let at = (table, user_key.clone());
                let old = match upkeep.mine.rows.get(&at).or_else(|| group.rows.get(&at)) {
                    Some(known) => known.clone(),
                    None => self.current_row(sv, seqno, table, user_key, &layout)?,
                };
                let new = (e.kind == Kind::Put).then(|| row.clone());
                let old_values = old.as_ref().map(|r| RowValues::parse(&layout, user_key, r)).transpose()?;
                let new_values = new.as_ref().map(|r| RowValues::parse(&layout, user_key, r)).transpose()?;
                for &index in &indexes {
                    upkeep.change_entry(self, index, user_key, old_values.as_ref(), new_values.as_ref())?;
                }
                upkeep.mine.rows.insert(at, new);
            }
        }
        for c in &upkeep.unique {
            // An entry a later row of the batch removed again is not checked.
            if upkeep.mine.entries.get(&c.index).and_then(|e| e.get(&c.entry.key)) != Some(&true) {
                continue;
            }
            self.check_unique_entry(
                sv,
                seqno,
                c.index,
                c.tree,
                &c.def.layout,
                &c.entry,
                &[&upkeep.mine, group],
            )?;
        }
        // The batch's size was checked before its index entries were
        // known: with them it must still fit in one WAL record, which
        // recovery would otherwise read as a torn tail.
        let added: usize = upkeep.ops.iter().map(IndexOp::encoded_bytes_max).sum();
        let total = batch.encoded_len().saturating_add(added);
        if total > crate::log::format::PAYLOAD_BYTES_MAX {
            return Err(Error::InvalidArgument(format!(
                "with its index entries the batch would take {total} bytes, over a WAL record's limit of {} bytes: write it in parts",
                crate::log::format::PAYLOAD_BYTES_MAX
            )));
        }
        // Checked: from here on nothing fails, and the batch takes its
        // index changes.
        for op in upkeep.ops {
            match op {
                IndexOp::Put { index, key, value } => batch.put_raw(index, &key, &value),
                IndexOp::Delete { index, key } => batch.delete_raw(index, &key),
            }
        }
        if !upkeep.touched.is_empty() {
            self.indexes.note_touched(upkeep.touched);
        }
        group.absorb(upkeep.mine);
        Ok(())
    }

    /// The rows of `table` in `range` at `seqno` in `sv` under `overlays`
    /// (earlier writes not in `sv` yet, later overlays newer): what a range
    /// delete there removes, by key.
    fn rows_in_range(
        &self,
        sv: &SuperVersion,
        seqno: SeqNo,
        table: TreeId,
        range: crate::db::read::cursor::KeyRange,
        layout: &crate::row::layout::TableLayout,
        overlays: &[&GroupOverlay],
    ) -> Result<Vec<(Bytes, Bytes)>> {
        let mut rows: BTreeMap<Bytes, Option<Bytes>> = BTreeMap::new();
        // Keys from the range, rows by key: a row of a file written under an
        // older schema version is read into the current one.
        let mut reader = RangeReader::open(self, sv, seqno, table, range.clone(), Direction::Forward)?;
        while let Some((key, _)) = reader.next_entry()? {
            let row = self.current_row(sv, seqno, table, &key, layout)?;
            rows.insert(key, row);
        }
        for overlay in overlays {
            for ((tree, key), row) in &overlay.rows {
                if *tree == table && crate::db::read::cursor::in_range(&range, key) {
                    rows.insert(key.clone(), row.clone());
                }
            }
        }
        Ok(rows.into_iter().filter_map(|(k, row)| row.map(|r| (k, r))).collect())
    }

    /// The row bytes of `user_key` in `table` at `seqno`, if it exists.
    pub(crate) fn current_row(
        &self,
        sv: &SuperVersion,
        seqno: SeqNo,
        table: TreeId,
        user_key: &[u8],
        layout: &crate::row::layout::TableLayout,
    ) -> Result<Option<Bytes>> {
        let mut row = None;
        self.lookup(sv, seqno, table, user_key, Some(layout), &mut |v| {
            row = Some(v.cached_bytes(Some(layout)));
        })?;
        row.transpose()
    }

    /// Fails with [`Error::UniqueViolation`] if an entry other than
    /// `entry` holds its indexed values, in the index tree at `seqno` or in
    /// `overlays` (newest first), which override the tree.
    #[expect(clippy::too_many_arguments, reason = "the read view, the index and the entry")]
    pub(crate) fn check_unique_entry(
        &self,
        sv: &SuperVersion,
        seqno: SeqNo,
        index: TreeId,
        tree: &TreeDef,
        layout: &IndexLayout,
        entry: &IndexEntry,
        overlays: &[&GroupOverlay],
    ) -> Result<()> {
        let prefix = &entry.key[..entry.prefix_len];
        let upper = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        let range = (Bound::Included(prefix.to_vec()), upper);
        let overridden = |key: &[u8]| -> Option<bool> {
            overlays.iter().find_map(|o| o.entries.get(&index).and_then(|e| e.get(key)).copied())
        };
        let violation =
            || Error::UniqueViolation { index: tree.name.clone(), value: layout.describe_prefix(&entry.key) };
        for overlay in overlays {
            if let Some(entries) = overlay.entries.get(&index) {
                let bounds = (range.0.as_ref().map(Vec::as_slice), range.1.as_ref().map(Vec::as_slice));
                for (key, _) in entries.range::<[u8], _>(bounds) {
                    if key != &entry.key && overridden(key) == Some(true) {
                        return Err(violation());
                    }
                }
            }
        }
        let mut entries = RangeReader::open(self, sv, seqno, index, range, Direction::Forward)?;
        while let Some((key, _)) = entries.next_entry()? {
            if key.as_ref() != entry.key.as_slice() && overridden(&key) != Some(false) {
                return Err(violation());
            }
        }
        Ok(())
    }
}
