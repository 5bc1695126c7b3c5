//! Changing a table's columns: `ADD`, `DROP` and `RENAME COLUMN`, without
//! rewriting a file. The layouts and how older files are read are
//! `row/evolve.rs`; this is the change's place among the database's work.
//!
//! A change is one MANIFEST edit (a new schema version of the table) made
//! while owning the write path, so that no write group runs beside it. The
//! memtables must then hold no row of the table, since they keep no schema
//! version per row: when they do, they are flushed first (every SST names
//! the version its rows were written under, so flushed rows are read
//! through it). The new version is installed with a memtable of its own,
//! so a reader of the old one never meets a row written under the new. A
//! write encoded under the old version that reaches the
//! write path after the change is refused there (`write/commit.rs`); a row cache
//! entry is its file's own version, so none is read across the change.

use std::sync::Arc;

use crate::catalog::{TableVersionRecord, TreeKind};
use crate::db::state::versions::Memtables;
use crate::db::{state::inner::DbInner, state::versions::SuperVersion};
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::evolve::ColumnChange;
use crate::version::VersionEdit;
use crate::version::edit::SCHEMA_BYTES_MAX;

impl DbInner {
    pub(crate) fn alter_table(&self, table: TreeId, name: &str, changes: &[ColumnChange]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        self.with_exclusive_writer(|| {
            self.check_writable()?;
            let sv = self.versions.load_full();
            let records = next_versions(&sv, table, name, changes)?;
            if sv.memtables_holding(table).next().is_some() {
                // No write runs meanwhile: once flushed, the memtables hold
                // no row of the table until the change is installed.
                self.switch_memtable()?;
                self.wait_for_imms_flushed()?;
            }
            // Every commit so far is visible (the exclusive writer waits
            // for groups to publish): later rows are of the new versions.
            let start = self.writer.visible_seqno();
            let edit = VersionEdit {
                table_version_starts: records.iter().map(|r| (table, r.version, start)).collect(),
                table_versions: records.into_iter().map(|r| (table, r)).collect(),
                ..VersionEdit::default()
            };
            // Logged and installed under one hold of the version set, as
            // every install is: a flush or compaction installing between
            // the two would be hidden by this version. A reader holding the
            // old super version must never find a row of the new version in
            // its memtable: the new one comes with a memtable of its own.
            self.install(Memtables::Fresh, &[], |_| Ok(Some(edit))).map(drop)
        })
    }
}

/// The records of table `table`'s next schema versions, one per change,
/// checked against the table and its indexes in `sv`.
fn next_versions(
    sv: &SuperVersion,
    table: TreeId,
    name: &str,
    changes: &[ColumnChange],
) -> Result<Vec<TableVersionRecord>> {
    let catalog = &sv.version.catalog;
    let mut layout = match catalog.tree(table).map(|t| &t.kind) {
        None => return Err(Error::InvalidArgument(format!("table {name} was dropped"))),
        Some(TreeKind::Table(def)) => def.layout.clone(),
        Some(_) => {
            return Err(Error::InvalidArgument(format!(
                "{name} is a keyspace's table face, whose columns are fixed"
            )));
        }
    };
    // The ids of the columns each index holds: they stay while it does.
    let mut indexed: Vec<(u32, String)> = Vec::new();
    for (_, index, idx) in catalog.indexes_of(table) {
        if idx.building {
            return Err(Error::Busy(format!(
                "index {} of table {name} is being built; change the columns once it is done",
                index.name
            )));
        }
        let columns = idx.layout.columns().iter().chain(idx.layout.include());
        indexed.extend(columns.map(|&c| (layout.column_ids()[c], index.name.clone())));
    }
    let mut records = Vec::with_capacity(changes.len());
    for change in changes {
        if let ColumnChange::Drop { name: column } = change
            && let Ok(c) = layout.schema().index_of(column)
            && let Some((_, index)) = indexed.iter().find(|(id, _)| *id == layout.column_ids()[c])
        {
            return Err(Error::InvalidArgument(format!(
                "column {column} is in index {index} of table {name}: drop the index first"
            )));
        }
        let next = Arc::new(layout.altered(change)?);
        let record = TableVersionRecord::of(&next)?;
        let largest = record.defaults.iter().map(|(_, d)| d.len()).chain([record.schema_ipc.len()]).max();
        if largest.is_some_and(|n| n > SCHEMA_BYTES_MAX) {
            return Err(Error::InvalidArgument(format!(
                "the schema or a default of table {name} would take over {SCHEMA_BYTES_MAX} bytes in the MANIFEST"
            )));
        }
        records.push(record);
        layout = next;
    }
    Ok(records)
}
