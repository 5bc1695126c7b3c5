//! History windows at read time: how far back a tree's versions are kept
//! (what compaction may collect, `compaction/retain.rs`), which points a
//! read may still ask for, and the commit times a flush logs.
//!
//! A tree with a window keeps, from its `since` on, every version
//! committed after its *floor* — the last seqno committed at or before
//! `now - keep_for` — and each key's version at the floor. So a read at
//! any seqno from `max(since, floor)` on sees exactly what was committed
//! then: the version it sees is either newer than the floor (kept) or the
//! newest at or below it (kept). Floors only grow, since the commit clock
//! never runs backwards (`state/clock.rs`): a compaction that computed
//! its floor before a read checked its point used one at or below the
//! read's, and one that starts after sees the read's snapshot.

use crate::catalog::{Catalog, TreeHistory};
use crate::codec::internal::SeqNo;
use crate::db::state::inner::DbInner;
use crate::error::{Error, Result};
use crate::ids::TreeId;

/// A tree's history window as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryInfo {
    /// The window set.
    pub window: crate::catalog::HistoryWindow,
    /// The seqno from which the window holds (it was turned on, or made to
    /// keep more, just after it).
    pub since: u64,
    /// The oldest seqno a read as of a past point may ask for (`None`: the
    /// window has no duration, so no past point is guaranteed).
    pub oldest_seqno: Option<u64>,
    /// That point's commit time, if on record.
    pub oldest_time: Option<std::time::SystemTime>,
}

/// What a compaction of one tree keeps for its history window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HistoryRetention {
    /// Every version above it is kept, and each key's newest at or below
    /// it (`None`: no duration).
    pub floor: Option<SeqNo>,
    /// Each key's newest this many versions are kept (0: no count).
    pub versions: u32,
}

impl DbInner {
    /// The floor of a window of `keep_for_ms` now: the last seqno
    /// committed at or before its start (0 when every commit timed is
    /// inside it).
    fn history_floor(&self, tree: TreeId, keep_for_ms: u64) -> SeqNo {
        let start = self.clock.now_ms().saturating_sub(keep_for_ms);
        // Never below a floor already handed out for the tree (marks
        // thinned, the wall clock set back): a compaction may have used it.
        self.clock.floor_at_least(tree, self.clock.seqno_at(start).unwrap_or(0))
    }

    /// What a compaction of `tree` must keep beyond its snapshots, if the
    /// tree keeps history. Called before the compaction lists the live
    /// snapshots.
    pub(crate) fn history_retention(&self, tree: TreeId) -> Option<HistoryRetention> {
        let history = self.versions.load().version.catalog.history(tree)?;
        let floor = history.window.keep_for_ms().map(|ms| self.history_floor(tree, ms));
        Some(HistoryRetention { floor, versions: history.window.keep_versions.unwrap_or(0) })
    }

    /// The oldest seqno a read of `tree` may ask for, given its history.
    pub(crate) fn oldest_readable(&self, tree: TreeId, history: &TreeHistory) -> Option<SeqNo> {
        let ms = history.window.keep_for_ms()?;
        Some(history.since.max(self.history_floor(tree, ms)))
    }

    /// The history window of `tree` and the oldest point it holds.
    pub(crate) fn history_info(&self, tree: TreeId) -> Option<HistoryInfo> {
        let history = self.versions.load().version.catalog.history(tree)?;
        let oldest_seqno = self.oldest_readable(tree, &history);
        let oldest_time = oldest_seqno
            .and_then(|s| self.clock.time_of(s))
            .map(|ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms));
        Some(HistoryInfo { window: history.window, since: history.since, oldest_seqno, oldest_time })
    }

    /// Refuses a read of `tree` at `seqno`, a point in the past, unless
    /// the tree's history window still holds it.
    pub(crate) fn check_as_of(&self, tree: TreeId, seqno: SeqNo) -> Result<()> {
        let catalog = self.versions.load().version.catalog.clone();
        let Some(def) = catalog.tree(tree) else {
            return Err(Error::InvalidArgument(format!("unknown tree {tree}")));
        };
        let history = catalog.history(tree);
        match history.as_ref().and_then(|h| self.oldest_readable(tree, h)) {
            Some(oldest) if seqno >= oldest => Ok(()),
            oldest => Err(Error::HistoryUnavailable {
                what: match oldest {
                    Some(oldest) => format!(
                        "{} {:?} is readable as of seqno {oldest}{} onwards, not as of seqno {seqno}",
                        what(&catalog, tree),
                        def.name,
                        self.clock
                            .time_of(oldest)
                            .map(|t| format!(" ({})", describe_ms(t)))
                            .unwrap_or_default()
                    ),
                    None => format!(
                        "{} {:?} keeps no history{}: a read as of seqno {seqno}, a past point, is refused",
                        what(&catalog, tree),
                        def.name,
                        if history.is_some() { " window of time" } else { "" }
                    ),
                },
                oldest_seqno: oldest,
            }),
        }
    }

    /// Whether index `index` answers reads at `seqno`: its build ended by
    /// then (in this process), and, where its table keeps history, its
    /// own history holds `seqno` (an index built after a past point has
    /// none of the entries that point needs).
    pub(crate) fn index_answers_at(&self, catalog: &Catalog, index: TreeId, seqno: SeqNo) -> bool {
        let table_keeps_history = match catalog.tree(index).map(|t| &t.kind) {
            Some(crate::catalog::TreeKind::Index(def)) => {
                catalog.tree(def.table).is_some_and(|t| t.history.is_some())
            }
            _ => false,
        };
        self.indexes.ready_at(index, seqno)
            && (!table_keeps_history || catalog.history(index).is_some_and(|h| h.since <= seqno))
    }

    /// The commit-time marks a flush (or recovery) making seqnos up to
    /// `through` durable logs with its edit: those not logged yet, while
    /// some tree keeps history. Marks older than every window are
    /// forgotten here.
    pub(crate) fn commit_times_to_log(
        &self,
        catalog: &Catalog,
        through: SeqNo,
    ) -> (SeqNo, Vec<(SeqNo, u64)>) {
        if !catalog.any_timed() {
            // Nothing reads times without a window or a time to live: the
            // clock lets its marks go (a window turned on later starts its
            // own), and nothing is logged.
            self.clock.forget_all(through);
            return (0, Vec::new());
        }
        if let Some(ms) = self.commit_times_kept_from(catalog) {
            self.clock.forget_before(ms);
        }
        self.clock.take_unlogged(through)
    }

    /// The time before which commit-time marks may be forgotten: the start
    /// of the longest window; every mark while no tree keeps history
    /// (`None`: keep them all, as a window counting versions reports the
    /// times of versions however old).
    pub(crate) fn commit_times_kept_from(&self, catalog: &Catalog) -> Option<u64> {
        if !catalog.any_timed() {
            return Some(u64::MAX);
        }
        if catalog.trees_keep_versions() {
            return None;
        }
        // A time to live's floor is the last mark at or before `now - ttl`
        // (`state/clock.rs`): that mark stays, and every later one.
        let longest = match (catalog.longest_history_ms(), catalog.longest_ttl_ms()) {
            (Some(h), Some(t)) => h.max(t),
            (h, t) => h.or(t)?,
        };
        Some(self.clock.now_ms().saturating_sub(longest))
    }
}

/// "table", "keyspace" or "index", for messages.
fn what(catalog: &Catalog, tree: TreeId) -> &'static str {
    match catalog.tree(tree).map(|t| &t.kind) {
        Some(crate::catalog::TreeKind::Table(_)) => "table",
        Some(crate::catalog::TreeKind::Index(_)) => "index",
        _ => "keyspace",
    }
}

/// Unix milliseconds as an RFC 3339 UTC time, for messages.
pub(crate) fn describe_ms(ms: u64) -> String {
    i64::try_from(ms).ok().and_then(chrono::DateTime::from_timestamp_millis).map_or_else(
        || format!("{ms} ms after 1970"),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_read_as_utc() {
        assert_eq!(super::describe_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::describe_ms(1_795_999_999_123), "2026-11-30T00:53:19.123Z");
        assert_eq!(super::describe_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
