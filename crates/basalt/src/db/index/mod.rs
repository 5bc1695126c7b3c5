//! Secondary indexes of tables. Each index is a tree of its own whose keys
//! are `enc(indexed values) | primary key` (`row/index.rs`); the engine
//! keeps it: the group-commit leader reads each written row's old image
//! and adds the index deletes and puts to the same WAL record as the row
//! (`upkeep.rs`), creation sorts the existing rows' entries into SSTs while writes go on
//! (`build.rs`), and lookups, counts and planned scans read it
//! (`query.rs`). Nothing outside the engine has to know an index exists
//! for it to be right.

pub(crate) mod build;
pub(crate) mod plan;
pub(crate) mod query;
#[cfg(feature = "inspect")]
pub(crate) mod verify;

use crate::catalog::{Namespace, TreeKind};
use crate::db::state::handles::Table;
use crate::error::{Error, Result};
use crate::ids::TreeId;

crate::options::option_struct! {
/// How an index is made ([`Table::create_index`]).
#[derive(Debug, Clone, Default)]
pub struct IndexOptions {
    /// At most one row per indexed value. Rows with a null in an indexed
    /// column do not take part (as in SQL: nulls are never equal).
    pub unique: bool,
    /// Columns stored in each entry, by name, so a query that needs only
    /// indexed, primary-key and included columns is answered from the
    /// index alone.
    pub include: Vec<String>,
}
}

/// An index as [`Table::indexes`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexInfo {
    /// The index's name, unique within its table.
    pub name: String,
    /// Indexed columns, in key order.
    pub columns: Vec<String>,
    /// Included columns.
    pub include: Vec<String>,
    /// At most one row per indexed value.
    pub unique: bool,
}

impl Table {
    /// Creates an index `name` on `columns` (in key order) of any type a
    /// primary key may have, nullable ones included (nulls sort first).
    /// Rows already in the table are indexed before it returns; writes
    /// may go on meanwhile and are indexed too. Fails with a clear error,
    /// and creates nothing, on an unknown or unsupported column, a name
    /// in use, or (for a unique index) rows that already violate it
    /// ([`Error::UniqueViolation`]). A crash before it returns leaves no
    /// index behind.
    #[expect(clippy::needless_pass_by_value, reason = "built inline by the caller, as ScanOptions are")]
    pub fn create_index(&self, name: &str, columns: &[&str], opts: IndexOptions) -> Result<()> {
        build::create(self, name, columns, &opts)
    }

    /// Drops index `name` and its entries.
    pub fn drop_index(&self, name: &str) -> Result<()> {
        let inner = self.inner();
        let mut dropped = None;
        inner.drop_trees(|| {
            let catalog = inner.versions.load().version.catalog.clone();
            let (id, _) = self.find_index(&catalog, name)?;
            dropped = Some(id);
            Ok(vec![id])
        })?;
        if let Some(id) = dropped {
            inner.indexes.forget(id);
        }
        Ok(())
    }

    /// The table's indexes (those being created are not listed), in
    /// creation order.
    pub fn indexes(&self) -> Vec<IndexInfo> {
        // One load of the state: the index's column positions and the
        // schema they point into must be of the same version.
        let sv = self.inner().versions.load();
        let schema = self.layout_in(&sv).schema();
        let names = |cols: &[usize]| cols.iter().map(|&i| schema.field(i).name().clone()).collect();
        sv.version
            .catalog
            .indexes_of(self.tree())
            .filter(|(_, _, def)| !def.building)
            .map(|(_, tree, def)| IndexInfo {
                name: tree.name.clone(),
                columns: names(def.layout.columns()),
                include: names(def.layout.include()),
                unique: def.unique,
            })
            .collect()
    }

    /// The ready index called `name` in `catalog`.
    pub(crate) fn find_index(
        &self,
        catalog: &crate::catalog::Catalog,
        name: &str,
    ) -> Result<(TreeId, crate::catalog::IndexDef)> {
        match catalog.find(Namespace::IndexesOf(self.tree()), name) {
            Some((id, tree)) => match &tree.kind {
                TreeKind::Index(def) if !def.building => Ok((id, def.clone())),
                _ => Err(Error::InvalidArgument(format!("index {name} is being created"))),
            },
            None => Err(Error::InvalidArgument(format!("table {} has no index {name}", self.name()))),
        }
    }
}
