//! Which versions of a key a compaction keeps.
//!
//! Live snapshots split seqnos into *stripes*: stripe i holds the seqnos
//! that snapshot i (ascending) is the oldest to see; the last stripe is what
//! only the latest state sees. A reader sees, for a key, the newest version
//! at or below its seqno — so within a stripe only the newest version can
//! ever be read, and every older one in the same stripe is dropped. A
//! tombstone in the oldest stripe (visible to every reader) at the bottommost
//! level hides nothing any reader could see below it and is dropped too.
//!
//! A tree's history window (`db/read/history.rs`) keeps more: every version
//! above its floor (each one a stripe of its own), the newest at or below
//! the floor (the floor counts as a snapshot), and each key's newest
//! `versions` versions whatever their stripe.
//!
//! A range tombstone over a key counts as a delete of that key at the
//! tombstone's seqno: it takes its place among the key's versions, hides
//! the older ones of its stripe as a delete would, and is never written
//! (it lives in the version until nothing is left for it to cover).
//!
//! A tree with a time to live drops every version at or below its expiry
//! floor (`db/read/ttl.rs`), whatever the snapshots: every reader hides
//! them, and every older version of the key lies at or below it too.

use std::sync::Arc;

use crate::codec::internal::{Kind, SeqNo};
use crate::range_del::TombstoneSet;

/// Decides keep or drop for each entry of a merged, internal-key-ordered
/// stream.
#[derive(Debug)]
pub struct Retention {
    /// Live snapshot seqnos, ascending.
    snapshots: Vec<SeqNo>,
    bottommost: bool,
    current_key: Option<Vec<u8>>,
    /// Stripe of the last version kept for the current key.
    last_stripe: Option<usize>,
    /// Versions above it are all kept (a history window's floor).
    floor: Option<SeqNo>,
    /// Each key's newest this many versions are kept.
    versions: u32,
    /// Versions of the current key seen so far.
    seen: u32,
    /// The tree's range tombstones, if any.
    tombstones: Option<Arc<TombstoneSet>>,
    /// Seqnos of the range tombstones over the current key not yet passed,
    /// oldest last.
    pending: Vec<SeqNo>,
    /// Versions at or below it have expired (0: none).
    expired: SeqNo,
}

impl Retention {
    /// `snapshots` need not be sorted or unique.
    #[cfg(test)]
    pub fn new(snapshots: Vec<SeqNo>, bottommost: bool) -> Retention {
        Retention::with_history(snapshots, bottommost, None, 0)
    }

    /// A retention that also keeps every version above `floor` and the
    /// newest one at or below it, and each key's newest `versions`.
    pub fn with_history(
        mut snapshots: Vec<SeqNo>,
        bottommost: bool,
        floor: Option<SeqNo>,
        versions: u32,
    ) -> Retention {
        snapshots.extend(floor);
        snapshots.sort_unstable();
        snapshots.dedup();
        Retention {
            snapshots,
            bottommost,
            current_key: None,
            last_stripe: None,
            floor,
            versions,
            seen: 0,
            tombstones: None,
            pending: Vec::new(),
            expired: 0,
        }
    }

    /// This retention, dropping every version at or below `expired`, a
    /// tree's expiry floor (0: none).
    pub fn with_expiry(mut self, expired: SeqNo) -> Retention {
        self.expired = expired;
        self
    }

    /// This retention, honouring the tree's range tombstones.
    pub fn with_range_tombstones(mut self, tombstones: Arc<TombstoneSet>) -> Retention {
        self.tombstones = (!tombstones.is_empty()).then_some(tombstones);
        self
    }

    /// The stripe of `seqno`: index of the oldest snapshot that sees it.
    pub fn stripe(&self, seqno: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seqno)
    }

    /// The stripe of the versions only the latest state sees (above every
    /// snapshot and history floor).
    pub fn newest_stripe(&self) -> usize {
        self.snapshots.len()
    }

    /// Whether to keep this entry. Entries must come in internal-key order
    /// (user key ascending, then newest first).
    pub fn keep(&mut self, user_key: &[u8], seqno: SeqNo, kind: Kind) -> bool {
        if self.current_key.as_deref() != Some(user_key) {
            self.current_key = Some(user_key.to_vec());
            self.last_stripe = None;
            self.seen = 0;
            self.pending.clear();
            if let Some(set) = &self.tombstones {
                self.pending.extend_from_slice(set.all_covering(user_key));
            }
        }
        if seqno <= self.expired {
            return false;
        }
        // Range tombstones newer than this version come first, each as a
        // delete of the key (which is not written).
        while let Some(&t) = self.pending.first()
            && t > seqno
        {
            self.pending.remove(0);
            self.decide(t, Kind::Delete);
        }
        self.decide(seqno, kind)
    }

    /// [`Retention::keep`] for the next version of the current key.
    fn decide(&mut self, seqno: SeqNo, kind: Kind) -> bool {
        let stripe = self.stripe(seqno);
        self.seen = self.seen.saturating_add(1);
        if self.floor.is_some_and(|f| seqno > f) || self.seen <= self.versions {
            // History: a version the window keeps, a delete included.
            self.last_stripe = Some(stripe);
            return true;
        }
        if self.last_stripe == Some(stripe) {
            // A newer version in the same stripe hides this one from every reader.
            return false;
        }
        self.last_stripe = Some(stripe);
        // The stripe counts as handled even when its tombstone is dropped:
        // older versions in it stay hidden, so they are dropped as well.
        !(kind == Kind::Delete && self.bottommost && stripe == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(snapshots: Vec<SeqNo>, bottommost: bool, entries: &[(&str, SeqNo, Kind)]) -> Vec<(String, SeqNo)> {
        run_with(Retention::new(snapshots, bottommost), entries)
    }

    fn run_with(mut r: Retention, entries: &[(&str, SeqNo, Kind)]) -> Vec<(String, SeqNo)> {
        entries
            .iter()
            .filter(|(k, s, kind)| r.keep(k.as_bytes(), *s, *kind))
            .map(|(k, s, _)| ((*k).to_string(), *s))
            .collect()
    }

    #[test]
    fn without_snapshots_only_the_newest_version_survives() {
        let e = [("a", 9, Kind::Put), ("a", 5, Kind::Put), ("a", 1, Kind::Delete), ("b", 3, Kind::Put)];
        assert_eq!(run(vec![], false, &e), vec![("a".into(), 9), ("b".into(), 3)]);
    }

    #[test]
    fn each_snapshot_keeps_the_version_it_sees() {
        let e = [
            ("a", 9, Kind::Put),
            ("a", 7, Kind::Put),
            ("a", 5, Kind::Put),
            ("a", 2, Kind::Put),
            ("a", 1, Kind::Put),
        ];
        // Snapshot 6 sees seqno 5; snapshot 2 sees seqno 2; latest sees 9.
        assert_eq!(run(vec![6, 2], false, &e), vec![("a".into(), 9), ("a".into(), 5), ("a".into(), 2)]);
    }

    #[test]
    fn bottommost_tombstones_go_unless_a_snapshot_needs_them() {
        let e = [("a", 8, Kind::Delete), ("a", 4, Kind::Put), ("b", 6, Kind::Delete)];
        assert!(run(vec![], true, &e).is_empty());
        assert_eq!(run(vec![], false, &e), vec![("a".into(), 8), ("b".into(), 6)]);
        // Snapshot 5 sees a@4 and must not see the delete at 8 as missing data.
        assert_eq!(run(vec![5], true, &e), vec![("a".into(), 8), ("a".into(), 4), ("b".into(), 6)]);
    }

    #[test]
    fn a_history_floor_keeps_every_version_above_it_and_the_one_it_sees() {
        let e = [
            ("a", 9, Kind::Put),
            ("a", 8, Kind::Delete),
            ("a", 7, Kind::Put),
            ("a", 4, Kind::Put),
            ("a", 3, Kind::Put),
            ("b", 2, Kind::Delete),
            ("b", 1, Kind::Put),
        ];
        let kept = run_with(Retention::with_history(vec![], true, Some(5), 0), &e);
        // Above 5: 9, 8 (a delete) and 7; at 5 a reader sees 4; 3 is hidden.
        // b's delete at 2 is below the floor at the bottom: both go.
        assert_eq!(kept, vec![("a".into(), 9), ("a".into(), 8), ("a".into(), 7), ("a".into(), 4)]);
    }

    fn tombstones(list: &[(&str, Option<&str>, SeqNo)]) -> Arc<TombstoneSet> {
        Arc::new(TombstoneSet::new(
            list.iter()
                .map(|(a, b, s)| crate::range_del::RangeTombstone {
                    start: bytes::Bytes::copy_from_slice(a.as_bytes()),
                    end: b.map(|b| bytes::Bytes::copy_from_slice(b.as_bytes())),
                    seqno: *s,
                })
                .collect(),
        ))
    }

    #[test]
    fn a_range_tombstone_hides_older_versions_unless_a_snapshot_sees_them() {
        let e = [
            ("a", 9, Kind::Put),
            ("a", 3, Kind::Put),
            ("b", 4, Kind::Put),
            ("b", 2, Kind::Put),
            ("c", 1, Kind::Put),
            ("d", 1, Kind::Put),
        ];
        let set = tombstones(&[("a", Some("d"), 5)]);
        let r = Retention::new(vec![], false).with_range_tombstones(set.clone());
        // a@9 is newer than the tombstone; a@3, b and c are under it; d is past its end.
        assert_eq!(run_with(r, &e), vec![("a".into(), 9), ("d".into(), 1)]);
        // Snapshot 3 sees a@3, b@2 and c@1: each the newest it sees of its key.
        let r = Retention::new(vec![3], false).with_range_tombstones(set);
        assert_eq!(
            run_with(r, &e),
            vec![("a".into(), 9), ("a".into(), 3), ("b".into(), 2), ("c".into(), 1), ("d".into(), 1)]
        );
    }

    #[test]
    fn a_range_tombstone_counts_as_a_version_in_a_history_window() {
        let e = [("a", 8, Kind::Put), ("a", 4, Kind::Put), ("a", 2, Kind::Put)];
        let set = tombstones(&[("a", None, 6)]);
        // Above the floor 3: 8, the tombstone (6) and 4 are kept; 2 is the
        // version the floor sees, kept too.
        let r = Retention::with_history(vec![], true, Some(3), 0).with_range_tombstones(set.clone());
        assert_eq!(run_with(r, &e), vec![("a".into(), 8), ("a".into(), 4), ("a".into(), 2)]);
        // The newest two versions are 8 and the tombstone: 4 and 2 go.
        let r = Retention::with_history(vec![], true, None, 2).with_range_tombstones(set);
        assert_eq!(run_with(r, &e), vec![("a".into(), 8)]);
    }

    #[test]
    fn expired_versions_go_whatever_the_snapshots() {
        let e = [
            ("a", 9, Kind::Put),
            ("a", 5, Kind::Put),
            ("a", 3, Kind::Put),
            ("b", 4, Kind::Delete),
            ("b", 2, Kind::Put),
            ("c", 5, Kind::Put),
        ];
        // Snapshot 4 would keep a@3 and b@4, but both lie at or below the floor 5.
        let r = Retention::new(vec![4], false).with_expiry(5);
        assert_eq!(run_with(r, &e), vec![("a".into(), 9)]);
        // A range tombstone above the floor still hides what it covers.
        let r =
            Retention::new(vec![], false).with_expiry(3).with_range_tombstones(tombstones(&[("a", None, 7)]));
        assert_eq!(run_with(r, &e), vec![("a".into(), 9)]);
    }

    #[test]
    fn a_version_count_keeps_each_keys_newest() {
        let e = [("a", 9, Kind::Put), ("a", 8, Kind::Delete), ("a", 7, Kind::Put), ("b", 2, Kind::Put)];
        let kept = run_with(Retention::with_history(vec![], true, None, 2), &e);
        assert_eq!(kept, vec![("a".into(), 9), ("a".into(), 8), ("b".into(), 2)]);
    }
}
