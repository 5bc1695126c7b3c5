//! The catalog: every tree's name and kind. A database holds many LSM trees
//! that share its WAL, MANIFEST, block cache and write buffer: key-value
//! keyspaces (the default one serves `Db::get`/`Db::put`), tables (rows of
//! an Arrow schema under a primary key), and secondary indexes of a table.
//! Each kind has its own namespace: a keyspace and a table may share a
//! name; an index's name is unique within its table.
//!
//! The MANIFEST records a tree's creation, kind and drop (`version/edit.rs`);
//! the catalog is what replaying them gives, decoded: a table's schema as
//! a row layout. It changes only with DDL, so a version shares it with
//! the versions before and after it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::index::IndexLayout;
use crate::row::layout::TableLayout;

/// Name of the keyspace behind the key-value API's `Db` methods (and of
/// its table face, `Db::table("default")`).
pub(crate) const DEFAULT_KEYSPACE: &str = "default";

/// What kind of tree a tree is, as its MANIFEST record holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TreeKindRecord {
    /// A key-value keyspace.
    Keyspace,
    /// A table: primary key column indices and the Arrow IPC schema.
    Table { primary_key: Vec<usize>, schema_ipc: Vec<u8> },
    /// A secondary index of table `table` on `columns` (indices into the
    /// table's schema), carrying `include` columns in its entries.
    /// `building` while its creation backfills it.
    Index { table: TreeId, unique: bool, building: bool, columns: Vec<usize>, include: Vec<usize> },
}

/// A table's schema, decoded.
#[derive(Debug, Clone)]
pub(crate) struct TableDef {
    /// The layout derived from the schema and key.
    pub layout: Arc<TableLayout>,
    /// Primary key column indices.
    pub primary_key: Vec<usize>,
    /// The schema as an Arrow IPC stream (what the MANIFEST stores).
    pub schema_ipc: Arc<Vec<u8>>,
}

/// A secondary index's definition.
#[derive(Debug, Clone)]
pub(crate) struct IndexDef {
    /// The table whose rows the index maps.
    pub table: TreeId,
    /// At most one row per indexed value.
    pub unique: bool,
    /// Being backfilled: writes keep it up to date, queries do not use it.
    pub building: bool,
    /// Indexed and included columns, and how entries are laid out.
    pub layout: Arc<IndexLayout>,
}

/// A tree's kind with what it needs to be read.
#[derive(Debug, Clone)]
pub(crate) enum TreeKind {
    Keyspace,
    Table(TableDef),
    Index(IndexDef),
}

/// The namespaces of names: one per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Namespace {
    Keyspaces,
    Tables,
    /// The indexes of one table.
    IndexesOf(TreeId),
}

/// One tree: its name and kind.
#[derive(Debug, Clone)]
pub(crate) struct TreeDef {
    pub name: String,
    pub kind: TreeKind,
}

impl TreeDef {
    fn namespace(&self) -> Namespace {
        match &self.kind {
            TreeKind::Keyspace => Namespace::Keyspaces,
            TreeKind::Table(_) => Namespace::Tables,
            TreeKind::Index(i) => Namespace::IndexesOf(i.table),
        }
    }

    /// The record the MANIFEST keeps of this tree's kind.
    fn record(&self) -> TreeKindRecord {
        match &self.kind {
            TreeKind::Keyspace => TreeKindRecord::Keyspace,
            TreeKind::Table(t) => TreeKindRecord::Table {
                primary_key: t.primary_key.clone(),
                schema_ipc: (*t.schema_ipc).clone(),
            },
            TreeKind::Index(i) => TreeKindRecord::Index {
                table: i.table,
                unique: i.unique,
                building: i.building,
                columns: i.layout.columns().to_vec(),
                include: i.layout.include().to_vec(),
            },
        }
    }
}

/// Every tree of a database at one moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    trees: BTreeMap<TreeId, TreeDef>,
    /// Some tree is an index (kept so the write path checks it at no cost).
    has_indexes: bool,
}

/// The catalog changes of one MANIFEST record.
pub(crate) struct CatalogChange<'a> {
    pub created: &'a [(TreeId, String)],
    /// Kinds recorded, in order; a tree created without one is a keyspace.
    pub kinds: Vec<(TreeId, TreeKindRecord)>,
    pub dropped: &'a [TreeId],
}

impl CatalogChange<'_> {
    /// Whether the record changes the catalog at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.created.is_empty() && self.kinds.is_empty() && self.dropped.is_empty()
    }
}

impl Catalog {
    /// The catalog after `change`. `bad` makes the error of a record that
    /// cannot apply (it names the MANIFEST and the record's offset).
    pub(crate) fn apply(&self, change: &CatalogChange<'_>, bad: &dyn Fn(String) -> Error) -> Result<Catalog> {
        let mut next = self.clone();
        for (id, name) in change.created {
            let def = TreeDef { name: name.clone(), kind: TreeKind::Keyspace };
            if next.trees.insert(*id, def).is_some() {
                return Err(bad(format!("tree {id} created twice")));
            }
        }
        for (id, record) in &change.kinds {
            let kind = next.decode_kind(record).map_err(|e| bad(format!("tree {id}: {e}")))?;
            let tree = next.trees.get_mut(id).ok_or_else(|| bad(format!("kind of unknown tree {id}")))?;
            tree.kind = kind;
        }
        for id in change.dropped {
            next.trees.remove(id).ok_or_else(|| bad(format!("dropping unknown tree {id}")))?;
        }
        if let Some((id, _)) = next.trees.iter().find(|(_, t)| {
            matches!(&t.kind, TreeKind::Index(i) if !matches!(next.trees.get(&i.table).map(|t| &t.kind), Some(TreeKind::Table(_))))
        }) {
            return Err(bad(format!("index tree {id} outlives its table")));
        }
        next.has_indexes = next.trees.values().any(|t| matches!(t.kind, TreeKind::Index(_)));
        Ok(next)
    }

    fn decode_kind(&self, record: &TreeKindRecord) -> std::result::Result<TreeKind, String> {
        Ok(match record {
            TreeKindRecord::Keyspace => TreeKind::Keyspace,
            TreeKindRecord::Table { primary_key, schema_ipc } => {
                let schema =
                    crate::row::schema_from_ipc(schema_ipc).map_err(|e| format!("table schema: {e}"))?;
                let layout =
                    TableLayout::new(schema, primary_key).map_err(|e| format!("table schema: {e}"))?;
                TreeKind::Table(TableDef {
                    layout: Arc::new(layout),
                    primary_key: primary_key.clone(),
                    schema_ipc: Arc::new(schema_ipc.clone()),
                })
            }
            TreeKindRecord::Index { table, unique, building, columns, include } => {
                let Some(TreeKind::Table(t)) = self.trees.get(table).map(|t| &t.kind) else {
                    return Err(format!("an index of tree {table}, which is not a table"));
                };
                let layout = IndexLayout::new(t.layout.clone(), columns, include)
                    .map_err(|e| format!("index columns {columns:?} include {include:?}: {}", e.reason()))?;
                TreeKind::Index(IndexDef {
                    table: *table,
                    unique: *unique,
                    building: *building,
                    layout: Arc::new(layout),
                })
            }
        })
    }

    /// The tree `id`, if it exists.
    pub(crate) fn tree(&self, id: TreeId) -> Option<&TreeDef> {
        self.trees.get(&id)
    }

    /// The layout of a table's rows, or `None` for another kind of tree
    /// (a keyspace's table face has the key-value layout).
    pub(crate) fn table_layout(&self, id: TreeId) -> Option<Arc<TableLayout>> {
        match &self.trees.get(&id)?.kind {
            TreeKind::Table(t) => Some(t.layout.clone()),
            TreeKind::Keyspace | TreeKind::Index(_) => None,
        }
    }

    /// The indexes of table `table` (those being built too), in creation
    /// order.
    pub(crate) fn indexes_of(&self, table: TreeId) -> impl Iterator<Item = (TreeId, &TreeDef, &IndexDef)> {
        self.trees.iter().filter_map(move |(id, t)| match &t.kind {
            TreeKind::Index(i) if i.table == table => Some((*id, t, i)),
            _ => None,
        })
    }

    /// Whether any table has an index (the write path's fast check).
    pub(crate) fn has_indexes(&self) -> bool {
        self.has_indexes
    }

    /// The tree called `name` in `namespace`.
    pub(crate) fn find(&self, namespace: Namespace, name: &str) -> Option<(TreeId, &TreeDef)> {
        self.trees.iter().find(|(_, t)| t.namespace() == namespace && t.name == name).map(|(id, t)| (*id, t))
    }

    /// Names in `namespace`, in tree-id (creation) order.
    pub(crate) fn names(&self, namespace: Namespace) -> Vec<String> {
        self.trees.values().filter(|t| t.namespace() == namespace).map(|t| t.name.clone()).collect()
    }

    /// Every tree as the records that recreate it: (id, name, kind).
    pub(crate) fn records(&self) -> impl Iterator<Item = (TreeId, String, TreeKindRecord)> + '_ {
        self.trees.iter().map(|(id, t)| (*id, t.name.clone(), t.record()))
    }
}
