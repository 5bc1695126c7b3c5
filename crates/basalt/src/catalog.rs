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

use crate::codec::internal::SeqNo;
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::index::IndexLayout;
use crate::row::layout::TableLayout;

/// Name of the keyspace behind the key-value API's `Db` methods (and of
/// its table face, `Db::table("default")`).
pub(crate) const DEFAULT_KEYSPACE: &str = "default";

crate::options::option_struct! {
/// How much history a table or keyspace keeps: the versions its writes
/// replace and delete, which compaction would otherwise collect. Off (the
/// default) keeps none. A version is kept while either bound keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistoryWindow {
    /// Keep every version committed within this long before now, and the
    /// version each key had at the window's start: reads as of any point
    /// in the window (`Db::snapshot_at`) see exactly what was committed
    /// then. Milliseconds are the unit kept.
    pub keep_for: Option<std::time::Duration>,
    /// Keep each key's newest this many versions (deletes count), however
    /// old: a key's history returns at least these.
    pub keep_versions: Option<u32>,
}
}

impl HistoryWindow {
    /// A window keeping every version committed within `keep_for`.
    pub fn duration(keep_for: std::time::Duration) -> HistoryWindow {
        HistoryWindow { keep_for: Some(keep_for), keep_versions: None }
    }

    /// A window keeping each key's newest `n` versions.
    pub fn versions(n: u32) -> HistoryWindow {
        HistoryWindow { keep_for: None, keep_versions: Some(n) }
    }

    /// Whether the window keeps anything.
    pub fn is_on(&self) -> bool {
        self.keep_for.is_some_and(|d| !d.is_zero()) || self.keep_versions.is_some_and(|n| n > 0)
    }

    /// The duration in whole milliseconds (at least 1 when set).
    pub(crate) fn keep_for_ms(&self) -> Option<u64> {
        self.keep_for
            .filter(|d| !d.is_zero())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1))
    }
}

/// A tree's history window as the MANIFEST records it, with the seqno from
/// which it holds: every version committed after `since` is kept (within
/// the window), and so is the version each key had at `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeHistory {
    pub window: HistoryWindow,
    pub since: SeqNo,
}

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

/// A later version of a table's schema, as its MANIFEST record holds it
/// (`row/evolve.rs`; version 0 is the table's kind record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableVersionRecord {
    pub version: u32,
    /// Primary key column indices in this version's schema.
    pub primary_key: Vec<usize>,
    /// Each column's stable id.
    pub column_ids: Vec<u32>,
    /// The schema as an Arrow IPC stream.
    pub schema_ipc: Vec<u8>,
    /// (column index, Arrow IPC stream of a one-row batch holding the
    /// value rows written before the column was added read as).
    pub defaults: Vec<(usize, Vec<u8>)>,
}

/// A table's schema, decoded.
#[derive(Debug, Clone)]
pub(crate) struct TableDef {
    /// The current version's layout (earlier versions inside it).
    pub layout: Arc<TableLayout>,
    /// Primary key column indices at creation.
    pub primary_key: Vec<usize>,
    /// The schema at creation as an Arrow IPC stream (what the MANIFEST
    /// stores).
    pub schema_ipc: Arc<Vec<u8>>,
    /// The records of the versions after creation, in order: each shared,
    /// so a change copies pointers and not every earlier schema.
    pub versions: Arc<Vec<Arc<TableVersionRecord>>>,
    /// (version, seqno): the rows of commits after the seqno are of that
    /// version or a later one — each change of columns records the seqno
    /// it was made at, so a WAL row is read through the version it was
    /// written under (the change feed).
    pub version_starts: Arc<Vec<(u32, SeqNo)>>,
}

impl TableVersionRecord {
    /// The record of `layout`, a version after the first.
    pub(crate) fn of(layout: &TableLayout) -> Result<TableVersionRecord> {
        let mut defaults = Vec::new();
        for (c, d) in layout.defaults().iter().enumerate() {
            if let Some(d) = d {
                let field = arrow_schema::Field::new("default", d.data_type().clone(), false);
                let batch = arrow_array::RecordBatch::try_new(
                    Arc::new(arrow_schema::Schema::new(vec![field])),
                    vec![d.clone()],
                )
                .map_err(|e| Error::InvalidArgument(format!("default of column {c}: {e}")))?;
                defaults.push((c, crate::row::batch_to_ipc(&batch)?));
            }
        }
        Ok(TableVersionRecord {
            version: layout.version(),
            primary_key: layout.primary_key().to_vec(),
            column_ids: layout.column_ids().to_vec(),
            schema_ipc: crate::row::schema_to_ipc(layout.schema())?,
            defaults,
        })
    }

    /// The layout this record makes after `previous`.
    fn decode(&self, previous: &TableLayout) -> std::result::Result<TableLayout, String> {
        if self.version != previous.version() + 1 {
            return Err(format!("schema version {} after version {}", self.version, previous.version()));
        }
        let schema =
            crate::row::schema_from_ipc(&self.schema_ipc).map_err(|e| format!("table schema: {e}"))?;
        let mut defaults = vec![None; schema.fields().len()];
        for (c, ipc) in &self.defaults {
            let batch = crate::row::batch_from_ipc(ipc).map_err(|e| format!("default of column {c}: {e}"))?;
            let slot = defaults
                .get_mut(*c)
                .ok_or_else(|| format!("a default for column {c}, which is not there"))?;
            if batch.num_columns() != 1 || batch.num_rows() != 1 {
                return Err(format!("default of column {c} is not one value"));
            }
            *slot = Some(batch.column(0).clone());
        }
        previous
            .next_version(schema, &self.primary_key, self.column_ids.clone(), defaults)
            .map_err(|e| e.to_string())
    }
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

/// Longest keyspace, table or index name accepted, in bytes.
const TREE_NAME_BYTES_MAX: usize = 255;

impl Namespace {
    /// Refuses a name no tree of this namespace may take.
    pub(crate) fn check_name(self, name: &str) -> crate::error::Result<()> {
        if name.is_empty() || name.len() > TREE_NAME_BYTES_MAX {
            return Err(crate::error::Error::InvalidArgument(format!(
                "{} name must be 1 to {TREE_NAME_BYTES_MAX} bytes",
                self.what()
            )));
        }
        Ok(())
    }

    /// What this namespace's trees are called in messages.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Namespace::Keyspaces => "keyspace",
            Namespace::Tables => "table",
            Namespace::IndexesOf(_) => "index",
        }
    }
}

/// One tree: its name and kind.
#[derive(Debug, Clone)]
pub(crate) struct TreeDef {
    pub name: String,
    pub kind: TreeKind,
    /// The history the tree keeps (`None`: none). An index keeps its
    /// table's window, from its own `since` (its build's end).
    pub history: Option<TreeHistory>,
    /// The merge operator a keyspace is bound to, by name (`merge.rs`).
    pub merge_operator: Option<Arc<str>>,
    /// How long a version of a table's or keyspace's entries lives after
    /// its commit (`None`: for ever). An index lives by its table's.
    pub ttl: Option<TreeTtl>,
}

/// A time to live by write time (`docs/ttl.md`): a version committed more
/// than `ttl_ms` ago is expired. Commits before the TTL was set whose
/// time is not on record count as committed at `since_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeTtl {
    /// How long a version lives, in milliseconds (at least 1).
    pub ttl_ms: u64,
    /// The last seqno committed when the TTL was set.
    pub since_seqno: SeqNo,
    /// The unix millisecond the TTL was set at.
    pub since_ms: u64,
    /// The expiry floor when the TTL was last changed: what had expired
    /// then stays expired under a longer one, or none.
    pub floor_min: SeqNo,
}

impl TreeTtl {
    /// `ttl_ms` of a TTL turned off after it expired versions: nothing
    /// expires any more, and what had stays hidden (`floor_min`) until
    /// compaction drops it.
    pub const OFF_MS: u64 = u64::MAX;

    /// Whether versions expire (the TTL is not [`TreeTtl::OFF_MS`]).
    pub fn is_on(&self) -> bool {
        self.ttl_ms != Self::OFF_MS
    }
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
    /// Some tree has a time to live (kept so a read checks it at no cost).
    has_ttl: bool,
}

/// The catalog changes of one MANIFEST record.
pub(crate) struct CatalogChange<'a> {
    pub created: &'a [(TreeId, String)],
    /// Kinds recorded, in order; a tree created without one is a keyspace.
    pub kinds: Vec<(TreeId, TreeKindRecord)>,
    /// Later schema versions of tables, applied after the tables' kinds
    /// and before the indexes' (whose columns are the current version's).
    pub versions: &'a [(TreeId, TableVersionRecord)],
    /// History windows set (`None`: turned off), applied after every kind.
    pub histories: &'a [(TreeId, Option<TreeHistory>)],
    /// (table, schema version, seqno it began after).
    pub version_starts: &'a [(TreeId, u32, SeqNo)],
    /// Keyspaces bound to a merge operator, by its name.
    pub merge_operators: &'a [(TreeId, String)],
    /// Times to live set (`None`: turned off).
    pub ttls: &'a [(TreeId, Option<TreeTtl>)],
    pub dropped: &'a [TreeId],
}

impl CatalogChange<'_> {
    /// Whether the record changes the catalog at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.created.is_empty()
            && self.kinds.is_empty()
            && self.versions.is_empty()
            && self.histories.is_empty()
            && self.version_starts.is_empty()
            && self.merge_operators.is_empty()
            && self.ttls.is_empty()
            && self.dropped.is_empty()
    }
}

impl Catalog {
    /// The catalog after `change`. `bad` makes the error of a record that
    /// cannot apply (it names the MANIFEST and the record's offset).
    pub(crate) fn apply(&self, change: &CatalogChange<'_>, bad: &dyn Fn(String) -> Error) -> Result<Catalog> {
        let mut next = self.clone();
        for (id, name) in change.created {
            let def = TreeDef {
                name: name.clone(),
                kind: TreeKind::Keyspace,
                history: None,
                merge_operator: None,
                ttl: None,
            };
            if next.trees.insert(*id, def).is_some() {
                return Err(bad(format!("tree {id} created twice")));
            }
        }
        let is_index = |r: &TreeKindRecord| matches!(r, TreeKindRecord::Index { .. });
        for (id, record) in change.kinds.iter().filter(|(_, r)| !is_index(r)) {
            next.set_kind(*id, record, bad)?;
        }
        for (id, record) in change.versions {
            next.add_version(*id, record).map_err(|e| bad(format!("table tree {id}: {e}")))?;
        }
        for (id, record) in change.kinds.iter().filter(|(_, r)| is_index(r)) {
            next.set_kind(*id, record, bad)?;
        }
        for (id, version, seqno) in change.version_starts {
            let Some(TreeKind::Table(t)) = next.trees.get_mut(id).map(|t| &mut t.kind) else {
                return Err(bad(format!("a schema version start of tree {id}, not a table")));
            };
            let mut starts = (*t.version_starts).clone();
            starts.push((*version, *seqno));
            t.version_starts = Arc::new(starts);
        }
        for (id, history) in change.histories {
            let tree = next.trees.get_mut(id).ok_or_else(|| bad(format!("history of unknown tree {id}")))?;
            tree.history = *history;
        }
        for (id, name) in change.merge_operators {
            let tree =
                next.trees.get_mut(id).ok_or_else(|| bad(format!("merge operator of unknown tree {id}")))?;
            if !matches!(tree.kind, TreeKind::Keyspace) {
                return Err(bad(format!("merge operator {name} bound to tree {id}, not a keyspace")));
            }
            tree.merge_operator = Some(Arc::from(name.as_str()));
        }
        for (id, ttl) in change.ttls {
            let tree =
                next.trees.get_mut(id).ok_or_else(|| bad(format!("time to live of unknown tree {id}")))?;
            if matches!(tree.kind, TreeKind::Index(_)) {
                return Err(bad(format!("a time to live set on index tree {id}")));
            }
            if ttl.is_some_and(|t| t.ttl_ms == 0) {
                return Err(bad(format!("a time to live of 0 ms on tree {id}")));
            }
            tree.ttl = *ttl;
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
        next.has_ttl = next.trees.values().any(|t| t.ttl.is_some());
        Ok(next)
    }

    fn set_kind(&mut self, id: TreeId, record: &TreeKindRecord, bad: &dyn Fn(String) -> Error) -> Result<()> {
        let kind = self.decode_kind(record).map_err(|e| bad(format!("tree {id}: {e}")))?;
        let tree = self.trees.get_mut(&id).ok_or_else(|| bad(format!("kind of unknown tree {id}")))?;
        tree.kind = kind;
        Ok(())
    }

    /// Installs a later version of table `id`'s schema, and moves its
    /// indexes' column positions to it (by column id).
    fn add_version(&mut self, id: TreeId, record: &TableVersionRecord) -> std::result::Result<(), String> {
        let Some(TreeKind::Table(t)) = self.trees.get(&id).map(|t| &t.kind) else {
            return Err("a schema version of a tree that is not a table".into());
        };
        let previous = t.layout.clone();
        let layout = Arc::new(record.decode(&previous)?);
        let moved = |columns: &[usize]| -> std::result::Result<Vec<usize>, String> {
            columns
                .iter()
                .map(|&c| {
                    let cid = previous.column_ids()[c];
                    layout.column_ids().iter().position(|&i| i == cid).ok_or_else(|| {
                        format!(
                            "version {} drops column {}, which an index holds",
                            record.version,
                            previous.schema().field(c).name()
                        )
                    })
                })
                .collect()
        };
        let mut indexes = Vec::new();
        for (index, _, def) in self.indexes_of(id) {
            let columns = moved(def.layout.columns())?;
            let include = moved(def.layout.include())?;
            let index_layout = IndexLayout::new(layout.clone(), &columns, &include)
                .map_err(|e| format!("index tree {index}: {}", e.reason()))?;
            indexes.push((index, IndexDef { layout: Arc::new(index_layout), ..def.clone() }));
        }
        for (index, def) in indexes {
            if let Some(tree) = self.trees.get_mut(&index) {
                tree.kind = TreeKind::Index(def);
            }
        }
        if let Some(TreeKind::Table(t)) = self.trees.get_mut(&id).map(|t| &mut t.kind) {
            let mut versions = (*t.versions).clone();
            versions.push(Arc::new(record.clone()));
            t.versions = Arc::new(versions);
            t.layout = layout;
        }
        Ok(())
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
                    versions: Arc::default(),
                    version_starts: Arc::default(),
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

    /// [`Catalog::table_layout`], borrowed.
    pub(crate) fn table_layout_ref(&self, id: TreeId) -> Option<&Arc<TableLayout>> {
        match &self.trees.get(&id)?.kind {
            TreeKind::Table(t) => Some(&t.layout),
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

    /// The history tree `id` keeps, if any: its own record's window for a
    /// table or keyspace; for an index, its table's window from the later
    /// of the two `since`s (an index answers for no point before its
    /// build ended, nor before its table kept history).
    pub(crate) fn history(&self, id: TreeId) -> Option<TreeHistory> {
        let tree = self.trees.get(&id)?;
        let own = tree.history?;
        match &tree.kind {
            TreeKind::Index(i) => {
                let table = self.trees.get(&i.table)?.history?;
                Some(TreeHistory { window: table.window, since: own.since.max(table.since) })
            }
            _ => own.window.is_on().then_some(own),
        }
    }

    /// Whether some tree keeps history (the WAL and commit times are kept
    /// for it).
    pub(crate) fn any_history(&self) -> bool {
        self.trees.values().any(|t| t.history.is_some_and(|h| h.window.is_on()))
    }

    /// The longest `keep_for` of any tree, in milliseconds: how far back
    /// commit times and WAL files are kept.
    pub(crate) fn longest_history_ms(&self) -> Option<u64> {
        self.trees.values().filter_map(|t| t.history.and_then(|h| h.window.keep_for_ms())).max()
    }

    /// Tables and keyspaces keeping history (an index's window is its
    /// table's).
    pub(crate) fn history_trees(&self) -> usize {
        self.trees
            .values()
            .filter(|t| !matches!(t.kind, TreeKind::Index(_)) && t.history.is_some_and(|h| h.window.is_on()))
            .count()
    }

    /// Whether some tree keeps a count of versions.
    pub(crate) fn trees_keep_versions(&self) -> bool {
        self.trees.values().any(|t| t.history.is_some_and(|h| h.window.keep_versions.is_some_and(|n| n > 0)))
    }

    /// The time to live of tree `id` and the tree whose clock it runs by:
    /// its own, or for an index its table's (an entry lives as long as
    /// the row version it was written with).
    pub(crate) fn ttl(&self, id: TreeId) -> Option<(TreeId, TreeTtl)> {
        if !self.has_ttl {
            return None;
        }
        let tree = self.trees.get(&id)?;
        match &tree.kind {
            TreeKind::Index(i) => Some((i.table, self.trees.get(&i.table)?.ttl?)),
            _ => Some((id, tree.ttl?)),
        }
    }

    /// The longest time to live of any tree, in milliseconds: how far back
    /// commit times are kept for expiry.
    pub(crate) fn longest_ttl_ms(&self) -> Option<u64> {
        self.trees.values().filter_map(|t| t.ttl.filter(TreeTtl::is_on).map(|t| t.ttl_ms)).max()
    }

    /// Whether some tree keeps history or has a time to live: commit times
    /// are kept and logged while one does.
    pub(crate) fn any_timed(&self) -> bool {
        self.trees.values().any(|t| t.ttl.is_some_and(|t| t.is_on())) || self.any_history()
    }

    /// Every tree's time to live record.
    pub(crate) fn ttl_records(&self) -> impl Iterator<Item = (TreeId, Option<TreeTtl>)> + '_ {
        self.trees.iter().filter(|(_, t)| t.ttl.is_some()).map(|(id, t)| (*id, t.ttl))
    }

    /// The merge operator tree `id` is bound to, by name.
    pub(crate) fn merge_operator(&self, id: TreeId) -> Option<&Arc<str>> {
        self.trees.get(&id)?.merge_operator.as_ref()
    }

    /// Every keyspace's merge operator binding.
    pub(crate) fn merge_operator_records(&self) -> impl Iterator<Item = (TreeId, String)> + '_ {
        self.trees.iter().filter_map(|(id, t)| t.merge_operator.as_ref().map(|m| (*id, m.to_string())))
    }

    /// Every tree's history record.
    pub(crate) fn history_records(&self) -> impl Iterator<Item = (TreeId, Option<TreeHistory>)> + '_ {
        self.trees.iter().filter(|(_, t)| t.history.is_some()).map(|(id, t)| (*id, t.history))
    }

    /// Whether any table has an index (the write path's fast check).
    pub(crate) fn has_ttl(&self) -> bool {
        self.has_ttl
    }

    /// Whether some tree is an index.
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

    /// Every table's schema version starts, as their records.
    pub(crate) fn version_start_records(&self) -> impl Iterator<Item = (TreeId, u32, SeqNo)> + '_ {
        self.trees.iter().flat_map(|(id, t)| match &t.kind {
            TreeKind::Table(def) => def.version_starts.iter().map(|&(v, s)| (*id, v, s)).collect(),
            _ => Vec::new(),
        })
    }

    /// Every table's later schema versions, as their records.
    pub(crate) fn version_records(&self) -> impl Iterator<Item = (TreeId, TableVersionRecord)> + '_ {
        self.trees.iter().flat_map(|(id, t)| match &t.kind {
            TreeKind::Table(def) => {
                def.versions.iter().map(|v| (*id, TableVersionRecord::clone(v))).collect()
            }
            _ => Vec::new(),
        })
    }

    /// The schema versions tree `id`'s files may have been written under:
    /// every version of a table, 0 for other trees.
    pub(crate) fn knows_version(&self, id: TreeId, version: u32) -> bool {
        match self.trees.get(&id).map(|t| &t.kind) {
            Some(TreeKind::Table(t)) => version <= t.layout.version(),
            _ => version == 0,
        }
    }
}
