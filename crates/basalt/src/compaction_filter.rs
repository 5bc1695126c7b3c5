//! Compaction filters: an application's say over what compaction keeps of
//! a keyspace (`docs/ttl.md`). As a compaction rewrites a key's newest
//! value that no snapshot can read an older state of, the keyspace's
//! filter sees it and answers keep, remove, or change the value —
//! RocksDB's `CompactionFilter`, for expiry by a rule of the application's
//! own, garbage collection of values, or rewriting old formats.
//!
//! What a filter does shows only as compaction reaches an entry: a read
//! before that sees the entry as written. A removal of a value that may
//! have older versions below (not the last level, or a snapshot holds an
//! older one) writes a delete in its place, so nothing older comes back.
//! The built-in time to live (`Keyspace::set_ttl`) is applied at the same
//! point of compaction, and also hides expired versions from reads at once.

/// What a compaction filter is asked about: one key's newest value in a
/// compaction's inputs that no snapshot sees an older version of.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct FilterEntry<'a> {
    /// The keyspace's name.
    pub keyspace: &'a str,
    /// The key.
    pub key: &'a [u8],
    /// The value (read from its blob file where it lives in one).
    pub value: &'a [u8],
    /// The write's seqno.
    pub seqno: u64,
    /// The level the compaction writes to: 1 to 6, or 0 where small L0
    /// files under a write budget are merged among themselves.
    pub level: usize,
    /// Whether no level below holds this key's range: the compaction
    /// writes the key's last versions.
    pub bottommost: bool,
}

/// A compaction filter's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// Remove the key (a delete at the entry's seqno where older versions
    /// may lie below, nothing at all where none can).
    Remove,
    /// Keep the key with this value instead.
    ChangeValue(Vec<u8>),
}

/// A compaction filter, bound to keyspaces by name in
/// `Options::compaction_filters`. It runs on the compaction thread and
/// must be quick and deterministic enough for the application: the same
/// entry may be asked about again by a later compaction if it was kept. A
/// filter that panics keeps the entry.
pub trait CompactionFilter: Send + Sync {
    /// A name for messages and stats.
    fn name(&self) -> &str;

    /// What to do with `entry`.
    fn filter(&self, entry: &FilterEntry<'_>) -> FilterDecision;
}

impl std::fmt::Debug for dyn CompactionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactionFilter({:?})", self.name())
    }
}

/// `filter`'s decision on `entry`, a panic in it taken as keep: the filter
/// runs on the compaction thread, which must outlive its bugs.
pub(crate) fn decide(filter: &dyn CompactionFilter, entry: &FilterEntry<'_>) -> FilterDecision {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| filter.filter(entry)))
        .unwrap_or(FilterDecision::Keep)
}
