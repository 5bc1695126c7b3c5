//! An immutable picture of every tree's SSTs, level by level, with the
//! catalog (`catalog.rs`) that names the trees.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::edit::{BlobFileMeta, FileMeta, VersionEdit};
use crate::catalog::{Catalog, CatalogChange, TreeKindRecord};
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::range_del::TombstoneSet;

/// Number of levels per tree (L0 … L6), as LevelDB and RocksDB.
pub const LEVELS: usize = 7;

/// The SSTs of one tree.
#[derive(Debug, Clone, Default)]
pub struct TreeVersion {
    /// `levels[0]` holds overlapping files, newest first; deeper levels hold
    /// files with disjoint key ranges, sorted by smallest key.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
    /// Range tombstones flushed from memtables that still cover entries
    /// of the files (`range_del.rs`).
    pub range_tombstones: Arc<TombstoneSet>,
}

impl TreeVersion {
    fn new() -> Self {
        TreeVersion { levels: vec![Vec::new(); LEVELS], range_tombstones: crate::range_del::empty() }
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
    /// Blob files some SST of this version points into, by number.
    pub blobs: BTreeMap<u64, Arc<BlobFileMeta>>,
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
            versions: &edit.table_versions,
            histories: &edit.tree_histories,
            merge_operators: &edit.tree_merge_operators,
            ttls: &edit.tree_ttls,
            version_starts: &edit.table_version_starts,
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
        for blob in &edit.blob_files_added {
            if next.blobs.insert(blob.number, Arc::new(blob.clone())).is_some() {
                return Err(bad(format!("blob file {} added twice", blob.number)));
            }
        }
        for (id, level, meta) in &edit.files_added {
            if let Some((blob, _)) = meta.blob_refs.iter().find(|(b, _)| !next.blobs.contains_key(b)) {
                return Err(bad(format!(
                    "file {} points into blob file {blob}, which is not live",
                    meta.number
                )));
            }
            if !next.catalog.knows_version(*id, meta.schema_version) {
                return Err(bad(format!(
                    "file {} of tree {id} has schema version {}, which the tree never had",
                    meta.number, meta.schema_version
                )));
            }
            let tree = next
                .trees
                .get_mut(id)
                .ok_or_else(|| bad(format!("file {} for unknown tree {id}", meta.number)))?;
            // A moved file keeps the count of reads that paid for its overlap.
            let meta = FileMeta { merged_reads: meta.merged_reads.carried(), ..meta.clone() };
            tree.levels[*level].push(Arc::new(meta));
        }
        for tree in next.trees.values_mut() {
            sort_levels(tree);
        }
        let mut changed: BTreeMap<TreeId, Vec<crate::range_del::RangeTombstone>> = BTreeMap::new();
        for (id, t) in &edit.range_tombstones_added {
            let tree =
                next.trees.get(id).ok_or_else(|| bad(format!("range tombstone of unknown tree {id}")))?;
            let list = changed.entry(*id).or_insert_with(|| tree.range_tombstones.tombstones().to_vec());
            if list.iter().any(|old| old.seqno == t.seqno) {
                return Err(bad(format!("range tombstone {} of tree {id} added twice", t.seqno)));
            }
            list.push(t.clone());
        }
        for (id, seqno) in &edit.range_tombstones_dropped {
            let tree =
                next.trees.get(id).ok_or_else(|| bad(format!("range tombstone of unknown tree {id}")))?;
            let list = changed.entry(*id).or_insert_with(|| tree.range_tombstones.tombstones().to_vec());
            let before = list.len();
            list.retain(|t| t.seqno != *seqno);
            if list.len() == before {
                return Err(bad(format!("dropping range tombstone {seqno}, not in tree {id}")));
            }
        }
        for (id, list) in changed {
            if let Some(tree) = next.trees.get_mut(&id) {
                tree.range_tombstones = Arc::new(TombstoneSet::new(list));
            }
        }
        if !next.blobs.is_empty() {
            // A blob file no SST points into any more is garbage: it leaves
            // the version (and is collected once no older version holds it).
            let pointed: std::collections::HashSet<u64> = next.blob_references().map(|(b, _)| b).collect();
            next.blobs.retain(|number, _| pointed.contains(number));
        }
        Ok(next)
    }

    /// The first broken invariant of this version, if any: a file number
    /// appears once; a file's smallest key is not above its largest; below
    /// L0 a level's files are in key order and share no user key; every
    /// blob file an SST points into is live. Asked after every edit in
    /// debug builds (`VersionSet::log_and_apply`).
    pub fn broken_invariant(&self) -> Option<String> {
        let mut numbers = std::collections::HashSet::new();
        for (id, tree) in &self.trees {
            for (level, files) in tree.levels.iter().enumerate() {
                for f in files {
                    if !numbers.insert(f.number) {
                        return Some(format!("file {} appears twice (tree {id})", f.number));
                    }
                    if f.smallest.user_key > f.largest.user_key {
                        return Some(format!("file {} of tree {id}: smallest key above largest", f.number));
                    }
                    if let Some((blob, _)) = f.blob_refs.iter().find(|(b, _)| !self.blobs.contains_key(b)) {
                        return Some(format!("file {} points into blob file {blob}, not live", f.number));
                    }
                }
                if level == 0 {
                    continue;
                }
                if let Some(pair) = files.windows(2).find(|p| p[0].largest.user_key >= p[1].smallest.user_key)
                {
                    return Some(format!(
                        "tree {id} level {level}: files {} and {} overlap or are out of order",
                        pair[0].number, pair[1].number
                    ));
                }
            }
        }
        None
    }

    /// Every (blob file, value bytes) pointer count of every SST.
    pub fn blob_references(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.trees.values().flat_map(|t| t.all_files().flat_map(|(_, f)| f.blob_refs.iter().copied()))
    }

    /// The value bytes SSTs of this version point to in each blob file: an
    /// upper bound of its live bytes (an SST may still hold versions that
    /// newer ones shadow).
    pub fn blob_live_bytes(&self) -> std::collections::HashMap<u64, u64> {
        let mut live = std::collections::HashMap::new();
        for (blob, bytes) in self.blob_references() {
            let sum = live.entry(blob).or_insert(0u64);
            *sum = sum.saturating_add(bytes);
        }
        live
    }

    /// Numbers of every SST and blob file this version references.
    pub fn file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.trees
            .values()
            .flat_map(|t| t.all_files().map(|(_, f)| f.number))
            .chain(self.blobs.keys().copied())
    }

    /// An edit that recreates this version from nothing (the first record of
    /// a fresh MANIFEST).
    pub fn snapshot_edit(&self) -> VersionEdit {
        let mut e = VersionEdit {
            blob_files_added: self.blobs.values().map(|b| (**b).clone()).collect(),
            ..VersionEdit::default()
        };
        for (id, name, kind) in self.catalog.records() {
            e.trees_created.push((id, name));
            e.tree_kinds.push((id, kind));
        }
        e.table_versions = self.catalog.version_records().collect();
        e.tree_histories = self.catalog.history_records().collect();
        e.tree_merge_operators = self.catalog.merge_operator_records().collect();
        e.tree_ttls = self.catalog.ttl_records().collect();
        e.table_version_starts = self.catalog.version_start_records().collect();
        for (id, tree) in &self.trees {
            for (level, f) in tree.all_files() {
                e.files_added.push((*id, level, (**f).clone()));
            }
            e.range_tombstones_added
                .extend(tree.range_tombstones.tombstones().iter().map(|t| (*id, t.clone())));
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
