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

use crate::catalog::{Catalog, TreeTtl};
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

    /// The time-to-live records whose floor has grown past the one the
    /// MANIFEST holds, with the floor of now as their minimum: logged with
    /// each compaction (which may have dropped what lies under it: with
    /// the wall clock set back before a reopen, a lower floor would show
    /// older versions of keys whose newer ones are gone) and at close (so
    /// what was hidden stays hidden across the reopen).
    pub(crate) fn grown_expiry_floors(&self, catalog: &Catalog) -> Vec<(TreeId, Option<TreeTtl>)> {
        if !catalog.has_ttl() {
            return Vec::new();
        }
        catalog
            .ttl_records()
            .filter_map(|(id, ttl)| {
                let ttl = ttl?;
                let floor = self.clock.expiry_floor(id, &ttl);
                (floor > ttl.floor_min).then_some((id, Some(TreeTtl { floor_min: floor, ..ttl })))
            })
            .collect()
    }
}
