//! Internal keys: a user key with the sequence number and kind of the write.
//!
//! Versions of one user key sort newest first: the trailer is stored as
//! `!(seqno << 8 | kind)` big-endian when it is part of an encoded key, and
//! compared in reverse when kept as a number.

use std::cmp::Ordering;

use bytes::Bytes;

/// A sequence number: every write gets the next one; reads see writes up to a
/// snapshot's seqno. At most 2^56 - 1.
pub type SeqNo = u64;

/// Largest sequence number that fits in a trailer.
pub const SEQNO_MAX: SeqNo = (1 << 56) - 1;

/// What a versioned entry says about its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// The key was deleted at this seqno.
    Delete = 0,
    /// The key was set to a value at this seqno.
    Put = 1,
    /// The key was set to a value kept in a blob file; the entry's value
    /// is a `blob::BlobPointer`. Only SSTs of key-value trees hold it.
    Blob = 2,
    /// A merge operand: the key's value is the operand folded onto the
    /// version below it by the keyspace's merge operator (`merge.rs`).
    Merge = 3,
}

impl Kind {
    /// Decodes a kind byte; `None` for anything else.
    pub fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Delete),
            1 => Some(Kind::Put),
            2 => Some(Kind::Blob),
            3 => Some(Kind::Merge),
            _ => None,
        }
    }
}

/// Packs a seqno and kind into the 64-bit trailer stored beside each key.
pub fn pack_trailer(seqno: SeqNo, kind: Kind) -> u64 {
    debug_assert!(seqno <= SEQNO_MAX);
    (seqno << 8) | kind as u64
}

/// Splits a trailer into seqno and kind; `None` if the kind byte is unknown.
pub fn unpack_trailer(trailer: u64) -> Option<(SeqNo, Kind)> {
    Kind::from_u8((trailer & 0xff) as u8).map(|k| (trailer >> 8, k))
}

/// The largest trailer with seqno `seqno`: seeking to `(key, seek_trailer(s))`
/// lands on the newest version of `key` with seqno <= `s`.
pub fn seek_trailer(seqno: SeqNo) -> u64 {
    (seqno.min(SEQNO_MAX) << 8) | 0xff
}

/// The first 8 bytes of `user_key` as a big-endian number, zero-padded.
/// Where two keys' prefixes differ they order as the keys do: the first
/// differing byte decides both, and a padding zero stands only where the
/// shorter key has ended (so it sorts first either way). Equal prefixes
/// decide nothing unless both keys are at most 8 bytes long.
pub fn key_prefix(user_key: &[u8]) -> u64 {
    if let Some(first) = user_key.first_chunk::<8>() {
        return u64::from_be_bytes(*first);
    }
    let mut b = [0u8; 8];
    b[..user_key.len()].copy_from_slice(user_key);
    u64::from_be_bytes(b)
}

/// Byte-wise order of two user keys, the first 8 bytes compared as one
/// integer: searches in blocks, merges and flushes compare mostly keys that
/// differ in their first 8 bytes, for which a `memcmp` call costs more than
/// the comparison.
pub fn compare_user_keys(a: &[u8], b: &[u8]) -> Ordering {
    let (pa, pb) = (key_prefix(a), key_prefix(b));
    if pa != pb {
        return pa.cmp(&pb);
    }
    if a.len() <= 8 && b.len() <= 8 {
        // Equal padded prefixes: the shorter key is a prefix of the other.
        return a.len().cmp(&b.len());
    }
    a.cmp(b)
}

/// Orders `(user key, trailer)` pairs: user key ascending, then newest first.
pub fn compare(a_key: &[u8], a_trailer: u64, b_key: &[u8], b_trailer: u64) -> Ordering {
    compare_user_keys(a_key, b_key).then(b_trailer.cmp(&a_trailer))
}

/// An owned internal key, ordered user key ascending then seqno descending.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InternalKey {
    /// The user key.
    pub user_key: Bytes,
    /// `seqno << 8 | kind`.
    pub trailer: u64,
}

impl InternalKey {
    #[cfg(test)]
    /// Builds an internal key.
    pub fn new(user_key: Bytes, seqno: SeqNo, kind: Kind) -> Self {
        InternalKey { user_key, trailer: pack_trailer(seqno, kind) }
    }

    #[cfg(test)]
    /// The sequence number of the write.
    pub fn seqno(&self) -> SeqNo {
        self.trailer >> 8
    }

    /// The smallest internal key for `user_key` visible at `seqno`: seeking to
    /// it lands on the newest version with seqno <= `seqno`.
    pub fn seek_key(user_key: Bytes, seqno: SeqNo) -> Self {
        InternalKey { user_key, trailer: seek_trailer(seqno) }
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(&self.user_key, self.trailer, &other.user_key, other.trailer)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn user_keys_compare_as_bytes(
            // Small alphabets with zeros and lengths around 8, where the
            // padded prefixes tie.
            a in prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0xff]), 0..12),
            b in prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0xff]), 0..12),
        ) {
            prop_assert_eq!(compare_user_keys(&a, &b), a.cmp(&b));
            prop_assert_eq!(compare_user_keys(&a, &a), Ordering::Equal);
            let prefixes = key_prefix(&a).cmp(&key_prefix(&b));
            prop_assert!(prefixes == Ordering::Equal || prefixes == a.cmp(&b));
        }
    }

    #[test]
    fn newer_versions_sort_first() {
        let a = InternalKey::new(Bytes::from_static(b"k"), 5, Kind::Put);
        let b = InternalKey::new(Bytes::from_static(b"k"), 9, Kind::Delete);
        let c = InternalKey::new(Bytes::from_static(b"l"), 1, Kind::Put);
        assert!(b < a);
        assert!(a < c);
        assert!(InternalKey::seek_key(Bytes::from_static(b"k"), 7) < a);
        assert!(InternalKey::seek_key(Bytes::from_static(b"k"), 7) > b);
    }

    #[test]
    fn trailer_round_trips() {
        let t = pack_trailer(SEQNO_MAX, Kind::Delete);
        assert_eq!(unpack_trailer(t), Some((SEQNO_MAX, Kind::Delete)));
        assert_eq!(unpack_trailer(7 << 8 | 9), None);
        assert_eq!(unpack_trailer(7 << 8 | 2), Some((7, Kind::Blob)));
    }
}
