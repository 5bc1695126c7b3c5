//! The live snapshots: the seqnos reads are pinned to, each with the
//! number of handles on it, so that compaction keeps every version one of
//! them can see. Its lock is taken here only.

use std::collections::BTreeMap;

use crate::codec::internal::SeqNo;
use crate::ranked::{Rank, RankedMutex};

pub(crate) struct Snapshots {
    /// Seqno → handles on it.
    live: RankedMutex<BTreeMap<SeqNo, usize>>,
}

impl Snapshots {
    pub(crate) fn new() -> Snapshots {
        Snapshots { live: RankedMutex::new(Rank::Snapshots, BTreeMap::new()) }
    }

    /// Registers a snapshot at `now()`, read under the registry's lock so
    /// that a compaction listing the snapshots either sees this one or
    /// started before its seqno was visible. Returns the seqno.
    pub(crate) fn register(&self, now: impl FnOnce() -> SeqNo) -> SeqNo {
        let mut live = self.live.lock();
        let seqno = now();
        // The visible seqno only grows: a new snapshot is the newest.
        debug_assert!(
            live.last_key_value().is_none_or(|(&newest, _)| newest <= seqno),
            "a snapshot at {seqno} registered below a live one"
        );
        *live.entry(seqno).or_insert(0) += 1;
        seqno
    }

    /// Registers a snapshot at `seqno`, a committed point that may be
    /// older than live ones (a read as of a past point); returns whether
    /// it is older than `now()`, read under the registry's lock (see
    /// [`Snapshots::register`]).
    pub(crate) fn register_at(&self, seqno: SeqNo, now: impl FnOnce() -> SeqNo) -> bool {
        let mut live = self.live.lock();
        *live.entry(seqno).or_insert(0) += 1;
        seqno < now()
    }

    /// Another handle on the live snapshot at `seqno`.
    pub(crate) fn register_again(&self, seqno: SeqNo) {
        let mut live = self.live.lock();
        debug_assert!(live.contains_key(&seqno), "a second handle on snapshot {seqno}, which is not live");
        *live.entry(seqno).or_insert(0) += 1;
    }

    /// Drops one handle on the snapshot at `seqno`; the last one makes it
    /// no longer live.
    pub(crate) fn release(&self, seqno: SeqNo) {
        let mut live = self.live.lock();
        let Some(n) = live.get_mut(&seqno) else {
            debug_assert!(false, "snapshot {seqno} released but not live");
            return;
        };
        *n -= 1;
        if *n == 0 {
            live.remove(&seqno);
        }
    }

    /// The live snapshots' seqnos, ascending.
    pub(crate) fn seqnos(&self) -> Vec<SeqNo> {
        self.live.lock().keys().copied().collect()
    }

    /// The number of snapshot handles alive.
    pub(crate) fn handles(&self) -> usize {
        self.live.lock().values().sum()
    }
}
