//! Secondary indexes of tables. Each index is a tree of its own whose keys
//! are `enc(indexed values) | primary key` (`row/index.rs`); the engine
//! keeps it: the group-commit leader reads each written row's old image
//! and adds the index deletes and puts to the same WAL record as the row
//! (`write/index_upkeep.rs`), creation sorts the existing rows' entries into SSTs while writes go on
//! (`build.rs`), and lookups, counts and planned scans read it
//! (`query.rs`). Nothing outside the engine has to know an index exists
//! for it to be right.

pub(crate) mod build;
pub(crate) mod options;
pub(crate) mod plan;
pub(crate) mod query;
#[cfg(feature = "inspect")]
pub(crate) mod verify;

use crate::catalog::{Namespace, TreeKind};
use crate::db::state::handles::Table;
use crate::error::{Error, Result};
use crate::ids::TreeId;
use options::IndexInfo;

impl Table {
    /// [`Table::drop_index`]'s work.
    pub(crate) fn drop_index_tree(&self, name: &str) -> Result<()> {
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

    /// [`Table::indexes`]'s work.
    pub(crate) fn index_infos(&self) -> Vec<IndexInfo> {
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
