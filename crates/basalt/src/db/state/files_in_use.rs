//! The files running jobs hold (outputs not yet in a version, compaction
//! inputs being read), which no collection may delete, and the right to
//! collect, one collection at a time. Its locks are taken here only; the
//! collection itself is `jobs/cleanup.rs`.

use std::collections::HashSet;

use crate::ranked::{Rank, RankedGuard, RankedMutex};

pub(crate) struct FilesInUse {
    /// Files a running job uses: outputs being written, not yet in any
    /// version, and compaction inputs being read. Never obsolete.
    in_use: RankedMutex<HashSet<u64>>,
    /// Held while obsolete files are collected: the flush and compaction
    /// threads both collect, and neither may delete what the other did.
    collecting: RankedMutex<()>,
}

impl FilesInUse {
    pub(crate) fn new() -> FilesInUse {
        FilesInUse {
            in_use: RankedMutex::new(Rank::InUse, HashSet::new()),
            collecting: RankedMutex::new(Rank::Collecting, ()),
        }
    }

    /// Keeps the files `numbers` from collection until released. A job
    /// holds a file from the moment its number is handed out (under the
    /// versions lock, so no collection sees the number in neither set).
    pub(crate) fn hold(&self, numbers: impl IntoIterator<Item = u64>) {
        self.in_use.lock().extend(numbers);
    }

    /// Gives files back to collection: installed in a version (the caller
    /// holds the versions lock, as the collection does while it reads both
    /// sets) or abandoned (collected as garbage). A number may repeat (the
    /// blob file several compaction inputs point into); each must have
    /// been held.
    pub(crate) fn release(&self, numbers: &[u64]) {
        let mut in_use = self.in_use.lock();
        for (i, n) in numbers.iter().enumerate() {
            let held = in_use.remove(n);
            debug_assert!(held || numbers[..i].contains(n), "file {n} released but never held");
        }
    }

    /// Forgets every held file: recovery installed them all.
    pub(crate) fn release_all(&self) {
        self.in_use.lock().clear();
    }

    /// The files held now.
    pub(crate) fn held(&self) -> HashSet<u64> {
        self.in_use.lock().clone()
    }

    /// The right to collect obsolete files, held through a whole
    /// collection: the flush and compaction threads both collect, and
    /// neither may delete what the other did.
    pub(crate) fn collecting(&self) -> RankedGuard<'_, ()> {
        self.collecting.lock()
    }
}
