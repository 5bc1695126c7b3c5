//! Creating an index while writes go on. The index tree is created first,
//! marked as being built: from then on every write keeps it (upkeep) and
//! notes the primary keys it touched. The rows as of that moment are then
//! read from a snapshot and their entries written in steps, each under
//! the exclusive writer, skipping rows a later write touched (upkeep
//! already gave those their current entry; the snapshot's would be
//! stale). A last MANIFEST edit marks the index built. A crash before it
//! leaves a building index, which the next open drops: creation is all or
//! nothing.

use std::collections::BTreeMap;

use arrow_array::RecordBatch;
use bytes::Bytes;

use super::super::ddl::check_name;
use super::super::{DbInner, ScanOptions, Snapshot, Table};
use super::IndexOptions;
use super::upkeep::GroupOverlay;
use crate::catalog::{Namespace, TreeKind, TreeKindRecord};
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::encode::RowEncoder;
use crate::row::index::{IndexEntry, IndexLayout, RowValues};
use crate::version::VersionEdit;
use crate::wal::batch::WriteBatch;

/// Entries written per backfill step: each step holds the write path, so
/// writers wait at most one step.
const BACKFILL_STEP_ENTRIES: usize = 4096;

/// `Table::create_index`.
pub(super) fn create(table: &Table, name: &str, columns: &[&str], opts: &IndexOptions) -> Result<()> {
    let inner = table.inner();
    check_name(Namespace::IndexesOf(table.tree()), name)?;
    inner.check_writable()?;
    let catalog = inner.state.load().version.catalog.clone();
    if !matches!(catalog.tree(table.tree()).map(|t| &t.kind), Some(TreeKind::Table(_))) {
        return Err(Error::InvalidArgument(format!(
            "{} is not a table with a schema of its own; only tables have indexes",
            table.name()
        )));
    }
    let schema = table.schema();
    let column_index = |what: &str, c: &str| {
        schema.index_of(c).map_err(|_| {
            Error::InvalidArgument(format!("{what} column {c} is not in table {}", table.name()))
        })
    };
    let columns = columns.iter().map(|c| column_index("index", c)).collect::<Result<Vec<_>>>()?;
    let include = opts.include.iter().map(|c| column_index("included", c)).collect::<Result<Vec<_>>>()?;
    let layout = IndexLayout::new(table.layout().clone(), &columns, &include)?;
    let record = TreeKindRecord::Index {
        table: table.tree(),
        unique: opts.unique,
        building: true,
        columns: columns.clone(),
        include: include.clone(),
    };
    let (index, snapshot) = inner.with_exclusive_writer(|| -> Result<(TreeId, Snapshot)> {
        inner.check_writable()?;
        if inner.state.load().version.tree(table.tree()).is_none() {
            return Err(Error::InvalidArgument(format!("table {} was dropped", table.name())));
        }
        let index = inner.log_create(Namespace::IndexesOf(table.tree()), name, record)?;
        inner.indexes.builds.lock().insert(index, std::collections::HashSet::default());
        // Every write before this point is in the snapshot; every later
        // one sees the index and keeps it.
        Ok((index, Snapshot::new(inner.clone())))
    })?;
    let built = backfill(table, index, name, opts.unique, &layout, &snapshot).and_then(|()| {
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
            let mut versions = inner.versions.lock();
            let edit = VersionEdit { tree_kinds: vec![(index, record)], ..VersionEdit::default() };
            let version = inner.log_and_apply(&mut versions, edit)?;
            inner.state.replace(|s| super::super::SuperVersion {
                mem: s.mem.clone(),
                imms: s.imms.clone(),
                version,
            });
            let ready = inner.writer.last_seqno();
            inner.indexes.ready.lock().insert(index, ready);
            Ok(())
        })
    });
    drop(snapshot);
    inner.indexes.builds.lock().remove(&index);
    if let Err(e) = built {
        // Nothing of the index may stay; if even the drop fails, the next
        // open drops the building index.
        let _ = inner.drop_trees(|| {
            let still_there = inner.state.load().version.tree(index).is_some();
            Ok(if still_there { vec![index] } else { Vec::new() })
        });
        return Err(e);
    }
    Ok(())
}

/// Writes the entries of the snapshot's rows, in steps.
fn backfill(
    table: &Table,
    index: TreeId,
    name: &str,
    unique: bool,
    layout: &IndexLayout,
    snapshot: &Snapshot,
) -> Result<()> {
    let scan = table.scan(ScanOptions::default().snapshot(Some(snapshot)))?;
    let mut step: Vec<(Bytes, IndexEntry)> = Vec::new();
    for batch in scan {
        entries_of(table, layout, &batch?, &mut step)?;
        if step.len() >= BACKFILL_STEP_ENTRIES {
            write_step(table.inner(), index, name, unique, layout, std::mem::take(&mut step))?;
        }
    }
    write_step(table.inner(), index, name, unique, layout, step)
}

/// Appends the (primary key, entry) of every row of `batch`.
fn entries_of(
    table: &Table,
    layout: &IndexLayout,
    batch: &RecordBatch,
    out: &mut Vec<(Bytes, IndexEntry)>,
) -> Result<()> {
    let encoder = RowEncoder::new(table.layout(), batch)?;
    let (mut key, mut row) = (Vec::new(), Vec::new());
    for r in 0..batch.num_rows() {
        key.clear();
        row.clear();
        encoder.key(r, &mut key);
        encoder.row(r, &mut row);
        let values = RowValues::parse(table.layout(), &key, &row)?;
        out.push((Bytes::copy_from_slice(&key), layout.entry(&key, &values)));
    }
    Ok(())
}

/// Writes one step of entries under the exclusive writer, leaving out rows
/// written since the build began.
fn write_step(
    inner: &DbInner,
    index: TreeId,
    name: &str,
    unique: bool,
    layout: &IndexLayout,
    step: Vec<(Bytes, IndexEntry)>,
) -> Result<()> {
    if step.is_empty() {
        return Ok(());
    }
    inner.with_exclusive_writer(|| {
        inner.check_writable()?;
        let sv = inner.state.load_full();
        let Some(tree) = sv.version.catalog.tree(index) else {
            return Err(Error::InvalidArgument(format!(
                "index {name} was dropped while it was being created"
            )));
        };
        let builds = inner.indexes.builds.lock();
        let touched = builds.get(&index);
        let fresh: Vec<IndexEntry> = step
            .into_iter()
            .filter(|(pk, _)| touched.is_none_or(|t| !t.contains(pk)))
            .map(|(_, entry)| entry)
            .collect();
        drop(builds);
        if unique {
            let seqno = inner.writer.last_seqno();
            let mut own = GroupOverlay::default();
            let entries: BTreeMap<Vec<u8>, bool> = fresh.iter().map(|e| (e.key.clone(), true)).collect();
            own.set_entries(index, entries);
            for entry in fresh.iter().filter(|e| !e.has_null) {
                inner.check_unique_entry(&sv, seqno, index, tree, layout, entry, &[&own])?;
            }
        }
        let mut batch = WriteBatch::new();
        for entry in &fresh {
            // The limits upkeep holds every entry to: an index that took
            // an entry over them would refuse every later write of its row.
            inner.check_index_entry(&tree.name, entry)?;
            batch.put_raw(index, &entry.key, &entry.value);
        }
        inner.commit_owned(batch)
    })
}

impl DbInner {
    /// Drops the indexes whose creation never finished (the process
    /// stopped during their backfill). Runs at open, before any write.
    pub(crate) fn drop_unfinished_indexes(&self) -> Result<()> {
        let catalog = self.versions.lock().current_version().catalog.clone();
        let unfinished: Vec<TreeId> = catalog
            .records()
            .filter(|(_, _, kind)| matches!(kind, TreeKindRecord::Index { building: true, .. }))
            .map(|(id, _, _)| id)
            .collect();
        if unfinished.is_empty() {
            return Ok(());
        }
        let edit = VersionEdit { trees_dropped: unfinished, ..VersionEdit::default() };
        let version = self.versions.lock().log_and_apply(edit)?;
        self.state.replace(|s| super::super::SuperVersion {
            mem: s.mem.clone(),
            imms: s.imms.clone(),
            version,
        });
        Ok(())
    }
}
