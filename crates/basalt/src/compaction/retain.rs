//! Which versions of a key a compaction keeps.
//!
//! Live snapshots split seqnos into *stripes*: stripe i holds the seqnos
//! that snapshot i (ascending) is the oldest to see; the last stripe is what
//! only the latest state sees. A reader sees, for a key, the newest version
//! at or below its seqno — so within a stripe only the newest version can
//! ever be read, and every older one in the same stripe is dropped. A
//! tombstone in the oldest stripe (visible to every reader) at the bottommost
//! level hides nothing any reader could see below it and is dropped too.

use crate::codec::internal::{Kind, SeqNo};

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
}

impl Retention {
    /// `snapshots` need not be sorted or unique.
    pub fn new(mut snapshots: Vec<SeqNo>, bottommost: bool) -> Retention {
        snapshots.sort_unstable();
        snapshots.dedup();
        Retention { snapshots, bottommost, current_key: None, last_stripe: None }
    }

    /// The stripe of `seqno`: index of the oldest snapshot that sees it.
    fn stripe(&self, seqno: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seqno)
    }

    /// Whether to keep this entry. Entries must come in internal-key order
    /// (user key ascending, then newest first).
    pub fn keep(&mut self, user_key: &[u8], seqno: SeqNo, kind: Kind) -> bool {
        if self.current_key.as_deref() != Some(user_key) {
            self.current_key = Some(user_key.to_vec());
            self.last_stripe = None;
        }
        let stripe = self.stripe(seqno);
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
        let mut r = Retention::new(snapshots, bottommost);
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
}
