//! Times to live at read time (`docs/ttl.md`): which versions of a tree
//! have expired now. A version expires `ttl` after its commit; commit times
//! come from the commit clock's marks (`state/clock.rs`), so "expired" is
//! one seqno per tree, the *expiry floor*: every version at or below it
//! was committed more than `ttl` ago, every one above it since. A read
//! hides what lies at or below the floor as if a range tombstone over the
//! whole tree, just above the floor, deleted it (`range_del.rs`); a
//! compaction drops it (`compaction/retain.rs`), and whole files at or
//! below it go without being read. Floors only grow, so a compaction that
//! dropped a version used a floor at or below any later read's.

use crate::catalog::Catalog;
use crate::codec::internal::SeqNo;
use crate::db::state::inner::DbInner;
use crate::ids::TreeId;

/// No version has expired.
pub(crate) const NOTHING_EXPIRED: SeqNo = 0;

impl DbInner {
    /// The expiry floor of `tree` now ([`NOTHING_EXPIRED`] without a time
    /// to live): an index's is its table's, so an entry expires with the
    /// row version it was written with (same commit, same time).
    pub(crate) fn expired_through(&self, catalog: &Catalog, tree: TreeId) -> SeqNo {
        match catalog.ttl(tree) {
            None => NOTHING_EXPIRED,
            Some((owner, ttl)) => self.clock.expiry_floor(owner, &ttl),
        }
    }
}
