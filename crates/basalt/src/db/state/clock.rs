//! Commit times: which seqno was committed when, so that a time maps to
//! the last seqno committed at or before it (a read as of a time, a
//! history window's start) and a seqno to its commit time (a version's
//! time in a key's history or a change feed). Its lock is taken here only.
//!
//! Each commit group's leader reads the wall clock once and records a
//! *mark*: (the group's last seqno, unix milliseconds). Marks of one
//! millisecond fold into one, the last seqno committed in it, so a
//! millisecond costs one mark however many groups it holds. The time goes
//! into the group's WAL seal (`log/format.rs`); a flush logs the marks of
//! the seqnos it made durable in the MANIFEST (`version/edit.rs`, tag 15)
//! while some tree keeps history, and recovery rebuilds the rest from the
//! WAL's seals. Time never runs backwards here: a wall clock set back
//! stamps commits with the last time recorded until it catches up.

use crate::codec::internal::SeqNo;
use crate::ranked::{Rank, RankedMutex};
use crate::version::set::{COMMIT_MARKS_MAX, thin_commit_marks};

pub(crate) struct CommitClock {
    state: RankedMutex<Marks>,
    wall: std::sync::Arc<dyn crate::io::WallClock>,
}

impl std::fmt::Debug for CommitClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitClock")
    }
}

struct Marks {
    /// (last seqno committed in a millisecond, that unix millisecond),
    /// seqnos ascending, times never descending (two marks share a
    /// millisecond when the first was logged before the second came).
    list: Vec<(SeqNo, u64)>,
    /// Marks at or below this seqno are in the MANIFEST.
    logged_through: SeqNo,
    /// Seqnos at or below this have no known time: committed before the
    /// oldest mark's millisecond began, or before this process when the
    /// MANIFEST holds no mark.
    known_after: SeqNo,
    /// The latest time handed out by `now_ms`: time never runs backwards.
    now_high: u64,
    /// The highest history floor handed out per tree: floors never fall.
    floors: std::collections::HashMap<crate::ids::TreeId, SeqNo>,
}

impl CommitClock {
    /// A clock holding `logged`, the MANIFEST's marks, which time every
    /// commit after `after`, for a database whose seqnos up to `durable`
    /// are in SSTs: commits after the last mark (replayed from the WAL, or
    /// new) are timed exactly.
    pub(crate) fn new(
        after: SeqNo,
        logged: Vec<(SeqNo, u64)>,
        durable: SeqNo,
        wall: std::sync::Arc<dyn crate::io::WallClock>,
    ) -> CommitClock {
        let logged_through = logged.last().map_or(0, |&(s, _)| s).max(durable);
        let known_after = if logged.is_empty() { durable } else { after };
        CommitClock {
            state: RankedMutex::new(
                Rank::Clock,
                Marks {
                    list: logged,
                    logged_through,
                    known_after,
                    now_high: 0,
                    floors: std::collections::HashMap::default(),
                },
            ),
            wall,
        }
    }

    /// The time to stamp a commit with now: the wall clock, never before
    /// the last mark.
    pub(crate) fn now_ms(&self) -> u64 {
        let mut state = self.state.lock();
        let last = state.list.last().map_or(0, |&(_, t)| t);
        let now = self.wall.unix_ms().max(last).max(state.now_high);
        state.now_high = now;
        now
    }

    /// `floor`, or the highest floor handed out for `tree` before if that
    /// is higher (recorded): a floor a compaction used never falls under
    /// one a read checks against.
    pub(crate) fn floor_at_least(&self, tree: crate::ids::TreeId, floor: SeqNo) -> SeqNo {
        let mut state = self.state.lock();
        let high = state.floors.entry(tree).or_insert(0);
        *high = (*high).max(floor);
        *high
    }

    /// The expiry floor of a tree with time to live `ttl` now: every
    /// version at or below it was committed more than `ttl_ms` ago. It is
    /// the last seqno committed at or before `now - ttl_ms` (by the marks),
    /// and at least the TTL's `since_seqno` once `since_ms` is that old
    /// (commits before the TTL was set count as committed then). Never
    /// below a floor handed out before for `tree` (marks thinned, the wall
    /// clock set back): a compaction may have dropped what it let go.
    /// One hold of the lock.
    pub(crate) fn expiry_floor(&self, tree: crate::ids::TreeId, ttl: &crate::catalog::TreeTtl) -> SeqNo {
        let mut state = self.state.lock();
        let last = state.list.last().map_or(0, |&(_, t)| t);
        let now = self.wall.unix_ms().max(last).max(state.now_high);
        state.now_high = now;
        let start = now.saturating_sub(ttl.ttl_ms);
        // Commits up to `since_seqno` count as committed at `since_ms`
        // (whatever marks say of them): none expired before it, all after.
        let floor = if start >= ttl.since_ms {
            let n = state.list.partition_point(|&(_, t)| t <= start);
            n.checked_sub(1).map_or(0, |i| state.list[i].0).max(ttl.since_seqno)
        } else {
            0
        };
        let floor = floor.max(ttl.floor_min);
        let high = state.floors.entry(tree).or_insert(0);
        *high = (*high).max(floor);
        *high
    }

    /// Forgets every mark (no tree keeps history): commits up to
    /// `through` have no time from now on.
    pub(crate) fn forget_all(&self, through: SeqNo) {
        let mut state = self.state.lock();
        let last = state.list.last().map_or(0, |&(s, _)| s);
        state.known_after = state.known_after.max(last).max(through);
        state.list.clear();
        state.logged_through = state.logged_through.max(through);
        state.floors.clear();
    }

    /// Records that every seqno up to `seqno` was committed by `ms`.
    pub(crate) fn record(&self, seqno: SeqNo, ms: u64) {
        let mut state = self.state.lock();
        let logged_through = state.logged_through;
        let marks = &mut state.list;
        if seqno <= logged_through {
            // Durable before this clock began (a WAL record recovery
            // replays though an SST holds it): the MANIFEST's marks time
            // it, or nothing does.
            return;
        }
        match marks.last_mut() {
            Some(last) if seqno <= last.0 => {}
            // A mark already in the MANIFEST stays as logged: the next one
            // may share its millisecond.
            Some(last) if ms <= last.1 && last.0 > logged_through => last.0 = seqno,
            Some(last) if ms <= last.1 => {
                let t = last.1;
                marks.push((seqno, t));
            }
            _ => {
                marks.push((seqno, ms));
                if marks.len() > COMMIT_MARKS_MAX {
                    thin_commit_marks(marks);
                }
            }
        }
    }

    /// The last seqno committed at or before `ms`; `None` when no commit
    /// recorded is that old.
    pub(crate) fn seqno_at(&self, ms: u64) -> Option<SeqNo> {
        let state = self.state.lock();
        let n = state.list.partition_point(|&(_, t)| t <= ms);
        n.checked_sub(1).map(|i| state.list[i].0)
    }

    /// The first point at or after `seqno` that ends a millisecond's
    /// commits (every commit group's last seqno is one, folded per
    /// millisecond): a read there sees whole commits only. `None` when no
    /// mark is that new (a seqno committed outside a group, by a bulk
    /// load) or none that old is kept.
    pub(crate) fn commit_end_at_or_after(&self, seqno: SeqNo) -> Option<SeqNo> {
        let state = self.state.lock();
        if seqno <= state.known_after {
            // Older than every mark kept: which commit it ends is not known.
            return None;
        }
        let i = state.list.partition_point(|&(s, _)| s < seqno);
        state.list.get(i).map(|&(s, _)| s)
    }

    /// The time `seqno` was committed by (its millisecond, or an upper
    /// bound where marks were thinned); `None` when no mark covers it (a
    /// commit older than every mark kept, or not committed yet).
    pub(crate) fn time_of(&self, seqno: SeqNo) -> Option<u64> {
        self.state.lock().time_of(seqno)
    }

    /// [`CommitClock::time_of`] of each seqno, under one hold of the lock.
    pub(crate) fn times_of(&self, seqnos: impl Iterator<Item = SeqNo>) -> Vec<Option<u64>> {
        let state = self.state.lock();
        seqnos.map(|s| state.time_of(s)).collect()
    }

    /// The marks not yet in the MANIFEST whose seqnos are at or below
    /// `through` (a flush made them durable in SSTs), with the seqno after
    /// which they time every commit; they count as logged from now on,
    /// so the caller logs them.
    pub(crate) fn take_unlogged(&self, through: SeqNo) -> (SeqNo, Vec<(SeqNo, u64)>) {
        let mut state = self.state.lock();
        let from = state.list.partition_point(|&(s, _)| s <= state.logged_through);
        let mut to = state.list.partition_point(|&(s, _)| s <= through);
        // `through` ends a commit group inside a later mark's millisecond
        // (groups after it folded into that mark): the millisecond is cut
        // at it, so the commits now durable are timed by a logged mark.
        if through > state.logged_through
            && through > state.known_after
            && to.checked_sub(1).is_none_or(|i| state.list[i].0 < through)
            && let Some(&(s, t)) = state.list.get(to)
            && s > through
        {
            state.list.insert(to, (through, t));
            to += 1;
        }
        let out = state.list.get(from..to).map(<[_]>::to_vec).unwrap_or_default();
        // The first mark handed out times the commits after the one
        // before it (or after every commit this clock has no time of).
        let after = from.checked_sub(1).map_or(state.known_after, |i| state.list[i].0).max(state.known_after);
        state.logged_through = state.logged_through.max(through);
        (after, out)
    }

    /// Forgets marks older than the last one at or before `ms`.
    pub(crate) fn forget_before(&self, ms: u64) {
        let mut state = self.state.lock();
        let keep_from = state.list.partition_point(|&(_, t)| t <= ms).saturating_sub(1);
        if let Some(&(s, _)) = keep_from.checked_sub(1).and_then(|i| state.list.get(i)) {
            state.known_after = state.known_after.max(s);
        }
        state.list.drain(..keep_from);
    }

    /// The seqno at and below which commits have no known time.
    pub(crate) fn known_after(&self) -> SeqNo {
        self.state.lock().known_after
    }

    /// The number of marks held and the oldest one's time.
    pub(crate) fn span(&self) -> (usize, Option<u64>) {
        let state = self.state.lock();
        (state.list.len(), state.list.first().map(|&(_, t)| t))
    }
}

impl Marks {
    fn time_of(&self, seqno: SeqNo) -> Option<u64> {
        if seqno <= self.known_after {
            return None;
        }
        let i = self.list.partition_point(|&(s, _)| s < seqno);
        self.list.get(i).map(|&(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_maps_to_the_last_seqno_committed_by_it() {
        let clock = CommitClock::new(0, Vec::new(), 0, std::sync::Arc::new(crate::io::SystemClock));
        clock.record(3, 100);
        clock.record(5, 100);
        clock.record(9, 102);
        assert_eq!(clock.seqno_at(99), None);
        assert_eq!(clock.seqno_at(100), Some(5));
        assert_eq!(clock.seqno_at(101), Some(5));
        assert_eq!(clock.seqno_at(500), Some(9));
        assert_eq!(clock.time_of(4), Some(100));
        assert_eq!(clock.time_of(6), Some(102));
        assert_eq!(clock.time_of(10), None);
        assert_eq!(
            clock.times_of([1, 5, 6, 9, 10].into_iter()),
            vec![Some(100), Some(100), Some(102), Some(102), None]
        );
    }

    #[test]
    fn a_clock_set_back_never_runs_time_backwards() {
        let clock = CommitClock::new(0, Vec::new(), 0, std::sync::Arc::new(crate::io::SystemClock));
        clock.record(5, 200);
        clock.record(7, 150);
        assert_eq!(clock.seqno_at(199), None);
        assert_eq!(clock.seqno_at(200), Some(7));
        assert!(clock.now_ms() >= 200);
    }

    #[test]
    fn unlogged_marks_are_handed_out_once() {
        let clock = CommitClock::new(1, vec![(2, 10)], 2, std::sync::Arc::new(crate::io::SystemClock));
        clock.record(4, 11);
        clock.record(8, 12);
        // Seqnos 5 to 8 share millisecond 12: a flush through 5 cuts it.
        assert_eq!(clock.take_unlogged(5), (2, vec![(4, 11), (5, 12)]));
        assert_eq!(clock.take_unlogged(8), (5, vec![(8, 12)]));
        assert!(clock.take_unlogged(8).1.is_empty());
        clock.forget_before(11);
        assert_eq!(clock.span(), (3, Some(11)));
        assert_eq!(clock.time_of(2), None, "its mark was forgotten");
        assert_eq!(clock.time_of(3), Some(11));
    }
}
