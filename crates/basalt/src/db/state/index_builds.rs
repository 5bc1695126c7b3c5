//! What this process knows of index builds beyond the catalog: the rows
//! written while each build runs, and the first seqno each built index
//! answers for. Its locks are taken here only.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use crate::codec::internal::SeqNo;
use crate::ids::TreeId;
use crate::ranked::{Rank, RankedMutex};

#[derive(Debug)]
pub(crate) struct IndexBuilds {
    /// Index tree → primary keys written since its build began. Only the
    /// write path's owner (the group-commit leader, or a build installing
    /// its entries under the exclusive writer) touches it.
    touched: RankedMutex<HashMap<TreeId, HashSet<Bytes>>>,
    /// Index tree → the first seqno it answers for. Set when a build ends
    /// in this process; an index recovered at open answers at any seqno a
    /// snapshot of this process can have.
    ready: RankedMutex<HashMap<TreeId, SeqNo>>,
    /// The largest seqno `ready` has held: a read at or above it needs no
    /// look at the map (every read of the current state), so an index
    /// query takes no lock.
    ready_max: std::sync::atomic::AtomicU64,
    /// Set by `testing::skip_index_upkeep`: writes leave the indexes
    /// alone, the bug a check of index consistency must catch.
    #[cfg(feature = "testing")]
    pub(crate) skip_upkeep: std::sync::atomic::AtomicBool,
}

impl Default for IndexBuilds {
    fn default() -> Self {
        IndexBuilds {
            touched: RankedMutex::new(Rank::IndexBuilds, HashMap::new()),
            ready: RankedMutex::new(Rank::IndexReady, HashMap::new()),
            ready_max: std::sync::atomic::AtomicU64::new(0),
            #[cfg(feature = "testing")]
            skip_upkeep: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl IndexBuilds {
    /// Starts noting the rows written to index `index`'s table.
    pub(crate) fn start(&self, index: TreeId) {
        let previous = self.touched.lock().insert(index, HashSet::new());
        debug_assert!(previous.is_none(), "index {index} built twice at once");
    }

    /// Stops noting rows for `index` (its build ended, either way).
    pub(crate) fn end(&self, index: TreeId) {
        self.touched.lock().remove(&index);
    }

    /// Whether no build is under way.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.touched.lock().is_empty()
    }

    /// Notes rows written to the tables of indexes being built.
    pub(crate) fn note_touched(&self, touched: impl IntoIterator<Item = (TreeId, Bytes)>) {
        let mut builds = self.touched.lock();
        for (index, user_key) in touched {
            builds.entry(index).or_default().insert(user_key);
        }
    }

    /// The rows written since `index`'s build began.
    pub(crate) fn touched(&self, index: TreeId) -> Vec<Bytes> {
        self.touched.lock().get(&index).map(|t| t.iter().cloned().collect()).unwrap_or_default()
    }

    /// Index `index` answers reads from `seqno` on.
    pub(crate) fn set_ready(&self, index: TreeId, seqno: SeqNo) {
        let mut ready = self.ready.lock();
        ready.insert(index, seqno);
        // Raised under the map's lock, before a reader can see the index
        // answer at a seqno below it.
        self.ready_max.fetch_max(seqno, std::sync::atomic::Ordering::Release);
    }

    /// Forgets a dropped index.
    pub(crate) fn forget(&self, index: TreeId) {
        self.ready.lock().remove(&index);
    }

    /// Whether index `index` answers reads at `seqno` (an index built in
    /// this process does not answer for snapshots older than its build).
    pub(crate) fn ready_at(&self, index: TreeId, seqno: SeqNo) -> bool {
        if seqno >= self.ready_max.load(std::sync::atomic::Ordering::Acquire) {
            return true;
        }
        self.ready.lock().get(&index).is_none_or(|&ready| seqno >= ready)
    }
}
