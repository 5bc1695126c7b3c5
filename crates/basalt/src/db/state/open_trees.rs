//! The registry of open table and keyspace handles, by tree, so that a
//! drop can refuse a tree in use. Its lock is taken here only.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use crate::ids::TreeId;
use crate::ranked::{Rank, RankedMutex};
use crate::row::layout::TableLayout;

/// What the handles of one tree share; the registry watches it to refuse
/// dropping a tree that is in use.
#[derive(Debug)]
pub(crate) struct TreeShared {
    pub id: TreeId,
    pub name: String,
    /// The table's layout when the handle was opened, or the key-value
    /// layout of a keyspace's table face. A table's current layout is its
    /// catalog's (`Table::layout_in`): its columns may change.
    pub layout: Arc<TableLayout>,
}

pub(crate) struct OpenTrees {
    open: RankedMutex<HashMap<TreeId, Weak<TreeShared>>>,
}

impl OpenTrees {
    pub(crate) fn new() -> OpenTrees {
        OpenTrees { open: RankedMutex::new(Rank::OpenTrees, HashMap::new()) }
    }

    /// The shared state of tree `id`'s handles: the live one, or `make()`
    /// registered.
    pub(crate) fn open(&self, id: TreeId, make: impl FnOnce() -> TreeShared) -> Arc<TreeShared> {
        let mut open = self.open.lock();
        if let Some(shared) = open.get(&id).and_then(Weak::upgrade) {
            return shared;
        }
        let shared = Arc::new(make());
        debug_assert_eq!(shared.id, id, "tree {id} registered under another id");
        open.insert(id, Arc::downgrade(&shared));
        shared
    }

    /// Forgets tree `id` unless a handle (or an iterator or scan holding
    /// one) is alive; returns whether it did. The caller owns the write
    /// path, so no handle is opened between this and the drop it logs.
    pub(crate) fn forget_unless_open(&self, id: TreeId) -> bool {
        let mut open = self.open.lock();
        if open.get(&id).is_some_and(|w| w.strong_count() > 0) {
            return false;
        }
        open.remove(&id);
        true
    }
}
