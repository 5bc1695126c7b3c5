//! An immutable picture of every tree's SSTs, level by level, with the
//! catalog (`catalog.rs`) that names the trees.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::edit::{FileMeta, VersionEdit};
use crate::catalog::{Catalog, CatalogChange, TreeKindRecord};
use crate::error::{Error, Result};
use crate::ids::TreeId;

/// Number of levels per tree (L0 … L6), as LevelDB and RocksDB.
pub const LEVELS: usize = 7;

/// The SSTs of one tree.
#[derive(Debug, Clone, Default)]
pub struct TreeVersion {
    /// `levels[0]` holds overlapping files, newest first; deeper levels hold
    /// files with disjoint key ranges, sorted by smallest key.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
}

impl TreeVersion {
    fn new() -> Self {
        TreeVersion { levels: vec![Vec::new(); LEVELS] }
    }

    /// Files that may hold `user_key`, in the order a point lookup must
    /// probe them: L0 newest first, then at most one file per deeper level.
    pub fn files_for_key<'a, 'k>(
        &'a self,
        user_key: &'k [u8],
    ) -> impl Iterator<Item = &'a Arc<FileMeta>> + use<'a, 'k> {
        let l0 = self.levels[0].iter().filter(move |f| f.may_contain_key(user_key));
        let deeper = self.levels[1..].iter().filter_map(move |files| {
            let i = files.partition_point(|f| f.largest.user_key.as_ref() < user_key);
            files.get(i).filter(|f| f.may_contain_key(user_key))
        });
        l0.chain(deeper)
    }

    /// Every file of the tree.
    pub fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMeta>)> {
        self.levels.iter().enumerate().flat_map(|(l, files)| files.iter().map(move |f| (l, f)))
    }
}

/// Every tree's files at one moment, and the catalog of that moment.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// Trees by id.
    pub trees: BTreeMap<TreeId, TreeVersion>,
    /// Names and kinds of the trees; shared with the versions before and
    /// after this one until DDL changes it.
    pub catalog: Arc<Catalog>,
}

impl Version {
    /// The tree `id`, if it exists.
    pub fn tree(&self, id: TreeId) -> Option<&TreeVersion> {
        self.trees.get(&id)
    }

    /// The version after `edit`. `manifest` and `offset` name the record
    /// for errors: an edit that removes a missing file, or adds a file to a
    /// missing tree, is corruption of the MANIFEST.
    pub fn apply(&self, edit: &VersionEdit, manifest: &Path, offset: u64) -> Result<Version> {
        let bad = |what: String| Error::corruption(manifest, offset, what);
        let mut next = self.clone();
        // Schemas of MANIFESTs written before tree kinds make tables.
        let old_schemas = edit.tree_schemas.iter().map(|(id, key, ipc)| {
            (*id, TreeKindRecord::Table { primary_key: key.clone(), schema_ipc: ipc.clone() })
        });
        let change = CatalogChange {
            created: &edit.trees_created,
            kinds: old_schemas.chain(edit.tree_kinds.iter().cloned()).collect(),
            dropped: &edit.trees_dropped,
        };
        if !change.is_empty() {
            next.catalog = Arc::new(self.catalog.apply(&change, &bad)?);
        }
        for (id, _) in &edit.trees_created {
            next.trees.insert(*id, TreeVersion::new());
        }
        for id in &edit.trees_dropped {
            next.trees.remove(id);
        }
        for (id, level, number) in &edit.files_deleted {
            let tree =
                next.trees.get_mut(id).ok_or_else(|| bad(format!("file {number} of unknown tree {id}")))?;
            let files = &mut tree.levels[*level];
            let before = files.len();
            files.retain(|f| f.number != *number);
            if files.len() == before {
                return Err(bad(format!("deleting file {number} not in tree {id} level {level}")));
            }
        }
        for (id, level, meta) in &edit.files_added {
            let tree = next
                .trees
                .get_mut(id)
                .ok_or_else(|| bad(format!("file {} for unknown tree {id}", meta.number)))?;
            tree.levels[*level].push(Arc::new(meta.clone()));
        }
        for tree in next.trees.values_mut() {
            sort_levels(tree);
        }
        Ok(next)
    }

    /// Numbers of every SST this version references.
    pub fn file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.trees.values().flat_map(|t| t.all_files().map(|(_, f)| f.number))
    }

    /// An edit that recreates this version from nothing (the first record of
    /// a fresh MANIFEST).
    pub fn snapshot_edit(&self) -> VersionEdit {
        let mut e = VersionEdit::default();
        for (id, name, kind) in self.catalog.records() {
            e.trees_created.push((id, name));
            e.tree_kinds.push((id, kind));
        }
        for (id, tree) in &self.trees {
            for (level, f) in tree.all_files() {
                e.files_added.push((*id, level, (**f).clone()));
            }
        }
        e
    }
}

fn sort_levels(tree: &mut TreeVersion) {
    // Newest first: a later flush holds larger seqnos; the file number breaks ties.
    tree.levels[0].sort_by(|a, b| b.max_seqno.cmp(&a.max_seqno).then(b.number.cmp(&a.number)));
    for files in &mut tree.levels[1..] {
        files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    }
}
