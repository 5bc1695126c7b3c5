//! Range tombstones: "every key of `[start, end)` was deleted at seqno `s`",
//! one entry however many keys the range holds (`docs/range-deletes.md`).
//!
//! A tombstone hides a version of a key it covers when the version is
//! older than the tombstone and the reader sees the tombstone. Where
//! tombstones live: in the memtable that took them, then (after the flush)
//! in the version, logged in the MANIFEST, until compaction has dropped
//! every entry they cover. Readers gather them into a [`TombstoneSet`]:
//! the tombstones cut into disjoint fragments, each with the seqnos of the
//! tombstones over it, so "the newest tombstone over this key that this
//! reader sees" is one binary search.

use std::sync::Arc;

use bytes::Bytes;

use crate::codec::internal::SeqNo;

/// Every key from `start` (included) to `end` (excluded; `None`: no end)
/// deleted at `seqno`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// First key covered.
    pub start: Bytes,
    /// First key past the range; `None` when the range has no end.
    pub end: Option<Bytes>,
    /// The seqno of the delete.
    pub seqno: SeqNo,
}

impl RangeTombstone {
    /// Whether `key` lies in the range.
    pub fn covers(&self, key: &[u8]) -> bool {
        self.start.as_ref() <= key && self.end.as_ref().is_none_or(|e| key < e.as_ref())
    }

    /// Whether the range holds every key of `[smallest, largest]`.
    pub fn covers_span(&self, smallest: &[u8], largest: &[u8]) -> bool {
        self.start.as_ref() <= smallest && self.end.as_ref().is_none_or(|e| largest < e.as_ref())
    }

    /// Whether the range meets `[smallest, largest]`.
    pub fn meets_span(&self, smallest: &[u8], largest: &[u8]) -> bool {
        self.start.as_ref() <= largest && self.end.as_ref().is_none_or(|e| smallest < e.as_ref())
    }
}

/// `range` as `[start, end)` over byte strings: an excluded start or an
/// included end becomes the key right after it (the key followed by a
/// zero byte); no end stays `None`.
pub fn bytes_range<K: AsRef<[u8]>>(range: &impl std::ops::RangeBounds<K>) -> (Vec<u8>, Option<Vec<u8>>) {
    use std::ops::Bound;
    let after = |k: &K| {
        let mut v = k.as_ref().to_vec();
        v.push(0);
        v
    };
    let start = match range.start_bound() {
        Bound::Included(k) => k.as_ref().to_vec(),
        Bound::Excluded(k) => after(k),
        Bound::Unbounded => Vec::new(),
    };
    let end = match range.end_bound() {
        Bound::Included(k) => Some(after(k)),
        Bound::Excluded(k) => Some(k.as_ref().to_vec()),
        Bound::Unbounded => None,
    };
    (start, end)
}

/// Whether `[start, end)` is a range holding at least one key.
pub fn is_nonempty_range(start: &[u8], end: Option<&[u8]>) -> bool {
    end.is_none_or(|e| start < e)
}

/// One piece of the key space over which the same tombstones lie.
#[derive(Debug, Clone)]
struct Fragment {
    start: Bytes,
    end: Option<Bytes>,
    /// Seqnos of the tombstones over the piece, newest first.
    seqnos: Vec<SeqNo>,
}

/// Tombstones, fragmented for search; also keeps them as they were given
/// (for the MANIFEST and for compaction's bookkeeping).
#[derive(Debug, Clone, Default)]
pub struct TombstoneSet {
    tombstones: Vec<RangeTombstone>,
    fragments: Vec<Fragment>,
    /// A tree's expiry floor (`db/read/ttl.rs`), 0 for none: every
    /// version at or below it is hidden, from every reader, as by a
    /// tombstone over every key just above it.
    expired: SeqNo,
}

/// An empty set, shared.
pub fn empty() -> Arc<TombstoneSet> {
    static EMPTY: std::sync::OnceLock<Arc<TombstoneSet>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Arc::new(TombstoneSet::default())).clone()
}

impl TombstoneSet {
    /// The set of `tombstones` (any order; ranges holding no key are left
    /// out).
    pub fn new(mut tombstones: Vec<RangeTombstone>) -> TombstoneSet {
        tombstones.retain(|t| is_nonempty_range(&t.start, t.end.as_deref()));
        tombstones.sort_by(|a, b| a.start.cmp(&b.start).then(b.seqno.cmp(&a.seqno)));
        let fragments = fragment(&tombstones);
        TombstoneSet { tombstones, fragments, expired: 0 }
    }

    /// A set holding no tombstone that hides every version at or below
    /// `expired` (a tree's expiry floor, above 0).
    pub fn expired_through(expired: SeqNo) -> TombstoneSet {
        TombstoneSet { expired, ..TombstoneSet::default() }
    }

    /// True when it holds no tombstone (an expiry floor is not one).
    pub fn is_empty(&self) -> bool {
        self.tombstones.is_empty()
    }

    /// The tombstones, by start key.
    pub fn tombstones(&self) -> &[RangeTombstone] {
        &self.tombstones
    }

    /// The seqno of the newest tombstone over `key` at or below `read`.
    /// An expiry floor counts as a tombstone just above it, or just above
    /// `read` for a reader older than the floor (all it sees expired).
    pub fn covering(&self, key: &[u8], read: SeqNo) -> Option<SeqNo> {
        let found = self.fragment_of(key).and_then(|f| f.seqnos.iter().copied().find(|&s| s <= read));
        if self.expired == 0 {
            return found;
        }
        found.max(Some(self.expired.min(read).saturating_add(1)))
    }

    /// The seqnos of every tombstone over `key`, newest first.
    pub fn all_covering(&self, key: &[u8]) -> &[SeqNo] {
        self.fragment_of(key).map_or(&[], |f| f.seqnos.as_slice())
    }

    fn fragment_of(&self, key: &[u8]) -> Option<&Fragment> {
        let i = self.fragments.partition_point(|f| f.start.as_ref() <= key);
        let f = self.fragments.get(i.checked_sub(1)?)?;
        f.end.as_ref().is_none_or(|e| key < e.as_ref()).then_some(f)
    }

    /// Whether a tombstone at or below `read` meets `[lo, hi]` (`hi`
    /// `None`: no upper end); bounds are taken inclusively, which may say
    /// yes for a range that only touches an excluded bound.
    pub fn meets(&self, lo: &[u8], hi: Option<&[u8]>, read: SeqNo) -> bool {
        self.expired > 0
            || self.tombstones.iter().any(|t| {
                t.seqno <= read
                    && hi.is_none_or(|h| t.start.as_ref() <= h)
                    && t.end.as_ref().is_none_or(|e| lo < e.as_ref())
            })
    }

    /// The tombstones of every set, together (tombstones at or below
    /// `read` only, when given).
    /// An expiry floor carries over (the highest).
    pub fn union<'a>(sets: impl IntoIterator<Item = &'a TombstoneSet>, read: Option<SeqNo>) -> TombstoneSet {
        let mut expired = 0;
        let all = sets
            .into_iter()
            .flat_map(|s| {
                expired = expired.max(s.expired);
                s.tombstones.iter()
            })
            .filter(|t| read.is_none_or(|r| t.seqno <= r))
            .cloned()
            .collect();
        TombstoneSet { expired, ..TombstoneSet::new(all) }
    }
}

/// Cuts tombstones sorted by start into disjoint fragments: every start
/// and end is a boundary, and each piece between two boundaries lists the
/// tombstones over it. A piece no tombstone covers is left out.
fn fragment(tombstones: &[RangeTombstone]) -> Vec<Fragment> {
    if tombstones.is_empty() {
        return Vec::new();
    }
    let mut bounds: Vec<&Bytes> =
        tombstones.iter().flat_map(|t| std::iter::once(&t.start).chain(t.end.as_ref())).collect();
    bounds.sort();
    bounds.dedup();
    let unbounded = tombstones.iter().any(|t| t.end.is_none());
    // Piece i runs from bounds[i] to bounds[i + 1] (the last, when some
    // tombstone has no end, to the end of the key space).
    let pieces = if unbounded { bounds.len() } else { bounds.len() - 1 };
    let mut seqnos: Vec<Vec<SeqNo>> = vec![Vec::new(); pieces];
    for t in tombstones {
        let first = bounds.partition_point(|b| *b < &t.start);
        let last = match &t.end {
            Some(e) => bounds.partition_point(|b| *b < e),
            None => pieces,
        };
        for s in &mut seqnos[first..last] {
            s.push(t.seqno);
        }
    }
    let mut fragments: Vec<Fragment> = Vec::new();
    for (i, mut s) in seqnos.into_iter().enumerate() {
        if s.is_empty() {
            continue;
        }
        s.sort_unstable_by(|a, b| b.cmp(a));
        s.dedup();
        let start = bounds[i].clone();
        let end = bounds.get(i + 1).map(|b| (*b).clone());
        // Neighbours with the same tombstones are one fragment.
        if let Some(prev) = fragments.last_mut()
            && prev.end.as_ref() == Some(&start)
            && prev.seqnos == s
        {
            prev.end = end;
            continue;
        }
        fragments.push(Fragment { start, end, seqnos: s });
    }
    fragments
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: Option<&str>, seqno: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: Bytes::copy_from_slice(start.as_bytes()),
            end: end.map(|e| Bytes::copy_from_slice(e.as_bytes())),
            seqno,
        }
    }

    /// The set answers as a linear search of its tombstones does, for
    /// random tombstones over a small alphabet (so ranges meet, nest and
    /// share bounds) and every key and read seqno.
    #[test]
    fn fragments_answer_as_the_tombstones_do() {
        let mut rng = 0x5eed_u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let keys: Vec<String> =
            ["", "a", "aa", "ab", "b", "ba", "c", "d", "e"].iter().map(|s| (*s).to_string()).collect();
        for round in 0..500 {
            let n = next(8);
            let mut all = Vec::new();
            for seqno in 1..=n {
                let a = &keys[next(keys.len() as u64) as usize];
                let b = &keys[next(keys.len() as u64) as usize];
                let end = if next(5) == 0 { None } else { Some(b.as_str()) };
                all.push(t(a, end, seqno * 3));
            }
            let set = TombstoneSet::new(all.clone());
            for key in &keys {
                for read in 0..30 {
                    let expected = all
                        .iter()
                        .filter(|t| t.covers(key.as_bytes()) && t.seqno <= read)
                        .map(|t| t.seqno)
                        .max();
                    assert_eq!(
                        set.covering(key.as_bytes(), read),
                        expected,
                        "round {round} key {key:?} read {read}: {all:?}"
                    );
                }
                let mut every: Vec<SeqNo> =
                    all.iter().filter(|t| t.covers(key.as_bytes())).map(|t| t.seqno).collect();
                every.sort_unstable_by(|a, b| b.cmp(a));
                assert_eq!(set.all_covering(key.as_bytes()), every.as_slice(), "round {round} key {key:?}");
            }
        }
    }

    #[test]
    fn empty_ranges_are_left_out_and_open_ends_reach_every_key() {
        let set = TombstoneSet::new(vec![t("b", Some("b"), 5), t("c", Some("a"), 6), t("x", None, 7)]);
        assert_eq!(set.tombstones().len(), 1);
        assert_eq!(set.covering(b"b", 10), None);
        assert_eq!(set.covering(b"x", 10), Some(7));
        assert_eq!(set.covering(b"\xff\xff\xff", 10), Some(7));
        assert_eq!(set.covering(b"w", 10), None);
        assert_eq!(set.covering(b"x", 6), None);
        assert!(set.meets(b"a", Some(b"x"), 10));
        assert!(!set.meets(b"a", Some(b"w"), 10));
        assert!(!set.meets(b"a", None, 6));
    }
}
