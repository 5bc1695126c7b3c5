//! Catalog operations: create, open, list and drop keyspaces and tables
//! (`catalog.rs` has the model). Each change is one MANIFEST edit logged
//! while owning the write path, so no write batch sees a half-made catalog.
//! Keyspaces and tables are separate namespaces; the default keyspace is
//! also the table `"default"` (its table face, two binary columns).

use std::sync::Arc;

use arrow_schema::{Schema, SchemaRef};

use crate::catalog::{
    DEFAULT_KEYSPACE, HistoryWindow, Namespace, TreeHistory, TreeKind, TreeKindRecord, TreeTtl,
};
use crate::db::state::inner::DbInner;
use crate::db::state::open_trees::TreeShared;
use crate::db::state::versions::Memtables;
use crate::error::{Error, Result};
use crate::ids::{DEFAULT_TREE, TreeId};
use crate::row::layout::TableLayout;
use crate::row::schema_to_ipc;
use crate::version::VersionEdit;
use crate::version::edit::SCHEMA_BYTES_MAX;

/// The longest history window or time to live accepted.
const DURATION_MAX: std::time::Duration = std::time::Duration::from_secs(DURATION_MAX_YEARS * 366 * 86_400);
/// [`DURATION_MAX`] in years, for messages.
const DURATION_MAX_YEARS: u64 = 100;

/// The catalog record of a table, with its schema and key checked.
pub(crate) fn table_record(schema: &SchemaRef, primary_key: &[&str]) -> Result<TreeKindRecord> {
    let mut key = Vec::with_capacity(primary_key.len());
    for col in primary_key {
        let i = schema
            .index_of(col)
            .map_err(|_| Error::InvalidArgument(format!("primary key column {col} is not in the schema")))?;
        key.push(i);
    }
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .enumerate()
        .map(
            |(i, f)| {
                if key.contains(&i) { Arc::new(f.as_ref().clone().with_nullable(false)) } else { f.clone() }
            },
        )
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    TableLayout::new(schema.clone(), &key)?;
    let ipc = schema_to_ipc(&schema)?;
    if ipc.len() > SCHEMA_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "the schema takes {} bytes (Arrow IPC), more than the {SCHEMA_BYTES_MAX} a table may have",
            ipc.len()
        )));
    }
    Ok(TreeKindRecord::Table { primary_key: key, schema_ipc: ipc })
}

impl DbInner {
    /// The tree called `name` in `namespace` now, with its layout; the
    /// table `"default"` is the default keyspace.
    pub(crate) fn find_tree(&self, namespace: Namespace, name: &str) -> Option<(TreeId, Arc<TableLayout>)> {
        if namespace == Namespace::Tables && name == DEFAULT_KEYSPACE {
            return Some((DEFAULT_TREE, Arc::new(TableLayout::key_value())));
        }
        let catalog = self.versions.load().version.catalog.clone();
        let (id, tree) = catalog.find(namespace, name)?;
        let layout = match &tree.kind {
            TreeKind::Table(t) => t.layout.clone(),
            TreeKind::Keyspace | TreeKind::Index(_) => Arc::new(TableLayout::key_value()),
        };
        Some((id, layout))
    }

    pub(crate) fn create_tree(
        &self,
        namespace: Namespace,
        name: &str,
        kind: TreeKindRecord,
    ) -> Result<TreeId> {
        namespace.check_name(name)?;
        self.check_writable()?;
        self.with_exclusive_writer(|| {
            // Again, owning the write path: a close may have come first.
            self.check_writable()?;
            self.log_create(namespace, name, kind)
        })
    }

    /// Logs the creation of a tree and installs it; the caller owns the
    /// write path and checked the name.
    pub(crate) fn log_create(
        &self,
        namespace: Namespace,
        name: &str,
        kind: TreeKindRecord,
    ) -> Result<TreeId> {
        if self.find_tree(namespace, name).is_some() {
            return Err(Error::InvalidArgument(format!("{} {name} already exists", namespace.what())));
        }
        let mut created = None;
        self.install(Memtables::Keep, &[], |held| {
            // Tree ids come from the file-number counter: never reused, so
            // rows of a dropped tree still in a WAL can never reach a new one.
            let id = TreeId::try_from(held.new_file_number())
                .map_err(|_| Error::InvalidArgument("tree ids exhausted".into()))?;
            created = Some(id);
            Ok(Some(VersionEdit {
                trees_created: vec![(id, name.to_string())],
                tree_kinds: vec![(id, kind)],
                ..VersionEdit::default()
            }))
        })?;
        created.ok_or_else(|| Error::internal("a tree was created without an id"))
    }

    /// The shared state of the handles of a tree, registered so that a
    /// drop can refuse while one is alive.
    pub(crate) fn open_tree(&self, namespace: Namespace, name: &str) -> Result<Arc<TreeShared>> {
        let (id, layout) = self
            .find_tree(namespace, name)
            .ok_or_else(|| Error::InvalidArgument(format!("no {} {name}", namespace.what())))?;
        Ok(self.open_trees.open(id, || TreeShared { id, name: name.to_string(), layout }))
    }

    /// Drops a tree. A compaction running on it is not waited for (writes
    /// would wait with it): it finds the tree gone when it installs its
    /// result and discards it (`jobs/compact.rs`).
    pub(crate) fn drop_tree(&self, namespace: Namespace, name: &str) -> Result<()> {
        let what = namespace.what();
        self.drop_trees(|| {
            let (id, _) = self
                .find_tree(namespace, name)
                .ok_or_else(|| Error::InvalidArgument(format!("no {what} {name}")))?;
            if id == DEFAULT_TREE {
                return Err(Error::InvalidArgument(format!(
                    "the default keyspace cannot be dropped ({what} {name})"
                )));
            }
            if !self.open_trees.forget_unless_open(id) {
                return Err(Error::Busy(format!(
                    "{what} {name} is in use by a handle, an iterator or a scan"
                )));
            }
            // A table's indexes go with it, in the same edit.
            let catalog = self.versions.load().version.catalog.clone();
            let mut ids: Vec<TreeId> = catalog.indexes_of(id).map(|(index, _, _)| index).collect();
            ids.push(id);
            Ok(ids)
        })
    }

    /// Drops the trees `choose` names. It looks them up while this owns
    /// the write path, so that of two drops of one name the second finds
    /// nothing and fails with its own error (a lookup before would let
    /// both pass, and the second would log the drop of a tree that no
    /// longer exists).
    pub(crate) fn drop_trees(&self, choose: impl FnOnce() -> Result<Vec<TreeId>>) -> Result<()> {
        self.check_writable()?;
        self.with_exclusive_writer(|| {
            self.check_writable()?;
            let ids = choose()?;
            if ids.is_empty() {
                return Ok(());
            }
            self.log_drop(&ids)
        })?;
        // The drop is durable: files left behind by a failed deletion are
        // garbage that a later collection (or the next open) removes, not
        // a reason to tell the caller the drop failed.
        let _ = self.delete_obsolete_files(false);
        Ok(())
    }

    /// Logs the drop of `ids` and installs it; the caller owns the write
    /// path.
    pub(crate) fn log_drop(&self, ids: &[TreeId]) -> Result<()> {
        self.install_edit(VersionEdit { trees_dropped: ids.to_vec(), ..VersionEdit::default() })
    }

    /// Binds keyspace `tree` to the merge operator named `name`: one
    /// MANIFEST edit, logged owning the write path. Refused for an
    /// operator found nowhere, for a keyspace bound to another one (its
    /// operands would be read by the wrong fold), and for a keyspace
    /// keeping history (a key's history lists versions, not folds).
    pub(crate) fn set_merge_operator(&self, tree: TreeId, keyspace: &str, name: &str) -> Result<()> {
        if crate::merge::find(&self.opts.merge_operators, name).is_none() {
            return Err(Error::InvalidArgument(format!(
                "no merge operator {name:?}: neither a builtin nor in Options::merge_operators"
            )));
        }
        self.check_writable()?;
        self.with_exclusive_writer(|| {
            self.check_writable()?;
            let catalog = self.versions.load().version.catalog.clone();
            let def =
                catalog.tree(tree).ok_or_else(|| Error::InvalidArgument(format!("{keyspace} was dropped")))?;
            if !matches!(def.kind, TreeKind::Keyspace) {
                return Err(Error::InvalidArgument(format!("{keyspace} is not a keyspace")));
            }
            match def.merge_operator.as_deref() {
                Some(bound) if bound == name => return Ok(()),
                Some(bound) => {
                    return Err(Error::InvalidArgument(format!(
                        "keyspace {keyspace} is bound to merge operator {bound:?}: its operands cannot be read by another"
                    )));
                }
                None => {}
            }
            if def.history.is_some_and(|h| h.window.is_on()) {
                return Err(Error::InvalidArgument(format!(
                    "keyspace {keyspace} keeps history: a merge operator and a history window do not go together yet"
                )));
            }
            if def.ttl.is_some() {
                return Err(Error::InvalidArgument(format!(
                    "keyspace {keyspace} has (or had) a time to live: a merge operator and a time to live do not go together yet"
                )));
            }
            self.install_edit(VersionEdit { tree_merge_operators: vec![(tree, name.to_string())], ..VersionEdit::default() })
        })
    }

    /// Runs `set` (which logs a setting of table or keyspace `tree`, named
    /// `name`, and may refuse it) owning the write path, with the catalog
    /// and the tree's definition as they stand: refused for a dropped tree,
    /// and for an index (whose settings are its table's; `what` names the
    /// setting for that internal error).
    fn with_tree_setting(
        &self,
        tree: TreeId,
        name: &str,
        what: &str,
        set: impl FnOnce(&crate::catalog::Catalog, &crate::catalog::TreeDef) -> Result<()>,
    ) -> Result<()> {
        self.check_writable()?;
        self.with_exclusive_writer(|| {
            self.check_writable()?;
            let catalog = self.versions.load().version.catalog.clone();
            let def =
                catalog.tree(tree).ok_or_else(|| Error::InvalidArgument(format!("{name} was dropped")))?;
            if matches!(def.kind, TreeKind::Index(_)) {
                return Err(Error::internal(format!("{what} set on an index")));
            }
            set(&catalog, def)
        })
    }

    /// Sets the history window of `tree`, a table (with its indexes) or a
    /// keyspace: one MANIFEST edit, logged owning the write path. A window
    /// turned on holds from now on; one made to keep more (a longer
    /// duration, a higher count) holds from the old window's start: what
    /// the old one let go is not brought back (a count-only window had
    /// no start: from now on).
    pub(crate) fn set_history(&self, tree: TreeId, name: &str, window: HistoryWindow) -> Result<()> {
        if window.keep_for.is_some_and(|d| d > DURATION_MAX) {
            return Err(Error::InvalidArgument(format!(
                "a history window of {:?} is longer than the {DURATION_MAX_YEARS} years allowed",
                window.keep_for.unwrap_or_default(),
            )));
        }
        self.with_tree_setting(tree, name, "a history window", |catalog, def| {
            if window.is_on() && def.merge_operator.is_some() {
                return Err(Error::InvalidArgument(format!(
                    "{name} has a merge operator: a merge operator and a history window do not go together yet"
                )));
            }
            if window.is_on() && def.ttl.is_some() {
                return Err(Error::InvalidArgument(format!(
                    "{name} has (or had) a time to live: a history window and a time to live do not go together yet"
                )));
            }
            // Every commit so far is visible: the exclusive writer waits
            // for groups to publish.
            let now = self.writer.visible_seqno();
            let record = window.is_on().then(|| {
                let since = match def.history.filter(|h| h.window.is_on()) {
                    None => now,
                    Some(old) => {
                        let longer = window.keep_for_ms() > old.window.keep_for_ms();
                        let more = window.keep_versions.unwrap_or(0) > old.window.keep_versions.unwrap_or(0);
                        if longer || more {
                            // Everything above the old window's start was
                            // kept (by its duration); without a duration,
                            // nothing past is sure.
                            self.oldest_readable(tree, &old).unwrap_or(now).max(old.since)
                        } else {
                            old.since
                        }
                    }
                };
                TreeHistory { window, since }
            });
            let mut tree_histories = vec![(tree, record)];
            for (index, index_def, _) in catalog.indexes_of(tree) {
                let since = index_def.history.map_or(0, |h| h.since);
                tree_histories.push((
                    index,
                    record.map(|r| TreeHistory { window: r.window, since: since.max(r.since) }),
                ));
            }
            self.install_edit(VersionEdit { tree_histories, ..VersionEdit::default() })
        })
    }

    /// Sets the time to live of `tree`, a table (with its indexes) or a
    /// keyspace (`None`: versions live for ever): one MANIFEST edit, logged
    /// owning the write path. Versions committed before it whose time is
    /// not on record count as committed now. Refused with a history window
    /// (which keeps versions a TTL would drop) or a merge operator (whose
    /// operands would expire apart from their base).
    pub(crate) fn set_ttl(&self, tree: TreeId, name: &str, ttl: Option<std::time::Duration>) -> Result<()> {
        let ttl_ms = match ttl {
            None => None,
            Some(d) if d.is_zero() || d > DURATION_MAX => {
                return Err(Error::InvalidArgument(format!(
                    "a time to live must be from 1 ms to {DURATION_MAX_YEARS} years, not {d:?}"
                )));
            }
            Some(d) => Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)),
        };
        self.with_tree_setting(tree, name, "a time to live", |_, def| {
            if ttl_ms.is_some() && def.history.is_some_and(|h| h.window.is_on()) {
                return Err(Error::InvalidArgument(format!(
                    "{name} keeps history: a history window and a time to live do not go together yet"
                )));
            }
            if ttl_ms.is_some() && def.merge_operator.is_some() {
                return Err(Error::InvalidArgument(format!(
                    "{name} has a merge operator: a merge operator and a time to live do not go together yet"
                )));
            }
            // What expired under the old TTL stays expired (a compaction may
            // have dropped some of it), also after a reopen and with the
            // TTL off: its floor is the new record's minimum.
            let expired = def.ttl.map_or(0, |old| self.clock.expiry_floor(tree, &old));
            // Commits from now on are timed; those before, untimed while no
            // TTL was on, count as committed now. (Every commit so far is
            // visible: the exclusive writer waits for groups to publish.)
            let fresh = |ttl_ms| TreeTtl {
                ttl_ms,
                since_seqno: self.writer.visible_seqno(),
                since_ms: self.clock.now_ms(),
                floor_min: expired,
            };
            let record = match (ttl_ms, def.ttl) {
                (Some(ttl_ms), Some(old)) if old.ttl_ms == ttl_ms => Some(old),
                (Some(ttl_ms), Some(old)) if old.is_on() => {
                    Some(TreeTtl { ttl_ms, floor_min: expired, ..old })
                }
                (Some(ttl_ms), _) => Some(fresh(ttl_ms)),
                (None, _) if expired == 0 => None,
                (None, _) => Some(fresh(TreeTtl::OFF_MS)),
            };
            if record == def.ttl {
                return Ok(());
            }
            self.install_edit(VersionEdit { tree_ttls: vec![(tree, record)], ..VersionEdit::default() })
        })
    }

    /// The time to live of `tree` (`None`: none).
    pub(crate) fn ttl_of(&self, tree: TreeId) -> Option<std::time::Duration> {
        let catalog = self.versions.load().version.catalog.clone();
        catalog.tree(tree)?.ttl.filter(TreeTtl::is_on).map(|t| std::time::Duration::from_millis(t.ttl_ms))
    }
}
