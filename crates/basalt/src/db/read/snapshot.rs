//! Snapshots: a seqno that reads can be pinned to. Live snapshots are
//! registered so compaction keeps the versions they can see.

use std::ops::RangeBounds;
use std::sync::Arc;

use bytes::Bytes;

use crate::codec::internal::SeqNo;
use crate::db::read::history::describe_ms;
use crate::db::read::iter::{self, DbIterator, Direction};
use crate::db::state::inner::DbInner;
use crate::error::{Error, Result};
use crate::ids::{DEFAULT_TREE, TreeId};

/// A consistent read-only view of the database at one moment: now
/// ([`Db::snapshot`](crate::Db::snapshot)), or a past point
/// ([`Db::snapshot_at`](crate::Db::snapshot_at)), which reads only trees
/// whose history window still holds it.
pub struct Snapshot {
    inner: Arc<DbInner>,
    seqno: SeqNo,
    /// Taken at a point before the latest commit: each read checks the
    /// tree's history window.
    past: bool,
}

/// A past point to read the database as of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    /// Just after the commit that took this seqno (a version's or a
    /// change's seqno, `Snapshot::seqno`): commits are timed to the
    /// millisecond, and the point read is the end of that commit's
    /// millisecond, so a commit is never seen in part; the snapshot's
    /// `seqno()` says which point that is.
    Seqno(SeqNo),
    /// The last commit at or before this time (to the millisecond).
    Time(std::time::SystemTime),
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seqno", &self.seqno).finish_non_exhaustive()
    }
}

impl Snapshot {
    pub(crate) fn new(inner: Arc<DbInner>) -> Snapshot {
        let seqno = inner.snapshots.register(|| inner.writer.visible_seqno());
        Snapshot { inner, seqno, past: false }
    }

    /// A snapshot at `point`: refused if it is not committed yet, or (for
    /// a time) older than every commit time kept.
    pub(crate) fn at(inner: Arc<DbInner>, point: AsOf) -> Result<Snapshot> {
        inner.check_open()?;
        let visible = inner.writer.visible_seqno();
        let seqno = match point {
            AsOf::Seqno(s) if s > visible => {
                return Err(Error::InvalidArgument(format!(
                    "seqno {s} is not committed yet (the last commit took seqno {visible})"
                )));
            }
            // A seqno inside a commit (a transaction's keys, a row and its
            // index entries) is read just after the commit: from its
            // millisecond's end on, no commit is cut in two.
            AsOf::Seqno(s) if s == visible || s == 0 => s,
            // Where the clock no longer knows (older than every window),
            // the seqno as asked: each read refuses it.
            AsOf::Seqno(s) => match inner.clock.commit_end_at_or_after(s) {
                Some(end) => end.min(visible),
                None if s <= inner.clock.known_after() => s,
                None => visible,
            },
            AsOf::Time(t) => {
                let ms = t
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                if ms >= inner.clock.now_ms() {
                    visible
                } else {
                    let Some(s) = inner.clock.seqno_at(ms) else {
                        let (_, oldest) = inner.clock.span();
                        return Err(Error::HistoryUnavailable {
                            what: format!(
                                "no commit at or before {} is on record{}",
                                describe_ms(ms),
                                oldest
                                    .map(|t| format!(" (the oldest is at {})", describe_ms(t)))
                                    .unwrap_or_default()
                            ),
                            oldest_seqno: None,
                        });
                    };
                    s.min(visible)
                }
            }
        };
        // Registered at once: from here on compaction keeps what it reads.
        // Each read of a past point then checks its tree's window, which
        // tells whether the versions it needs were all kept until now
        // (`read/history.rs`). Whether the point is past is decided under
        // the registry's lock, as `Snapshot::new` reads the present: a
        // commit that lands meanwhile makes it past, and checked.
        let past = inner.snapshots.register_at(seqno, || inner.writer.visible_seqno());
        Ok(Snapshot { inner, seqno, past })
    }

    /// The seqno this snapshot reads at.
    pub fn seqno(&self) -> SeqNo {
        self.seqno
    }

    /// The value of `key` as of this snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.inner.get(DEFAULT_TREE, key.as_ref(), self.inner.snapshot_seqno(Some(self), DEFAULT_TREE)?)
    }

    /// `f` of the value of `key` as of this snapshot, borrowed where it
    /// lies (see `Db::get_with`).
    pub fn get_with<R>(&self, key: impl AsRef<[u8]>, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        let seqno = self.inner.snapshot_seqno(Some(self), DEFAULT_TREE)?;
        self.inner.get_with(DEFAULT_TREE, key.as_ref(), seqno, None, |v| f(v.as_slice()))
    }

    /// The commit time of this snapshot's seqno, if one is on record.
    pub fn commit_time(&self) -> Option<std::time::SystemTime> {
        self.inner
            .clock
            .time_of(self.seqno)
            .map(|ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    }

    /// Iterates over `range` as of this snapshot.
    pub fn iter<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>, direction: Direction) -> DbIterator {
        iter::new(&self.inner, DEFAULT_TREE, iter::owned_range(&range), direction, Some(self))
    }
}

impl DbInner {
    /// The seqno a read of `tree` given `snapshot` takes (`None`: now). A
    /// snapshot of another database is refused: seqnos are per database,
    /// so it would read this one at a moment that never was; so is a past
    /// snapshot the tree's history window no longer holds.
    pub(crate) fn snapshot_seqno(&self, snapshot: Option<&Snapshot>, tree: TreeId) -> Result<Option<SeqNo>> {
        match snapshot {
            None => Ok(None),
            Some(s) if std::ptr::eq(Arc::as_ptr(&s.inner), self) => {
                if s.past {
                    self.check_as_of(tree, s.seqno)?;
                }
                Ok(Some(s.seqno))
            }
            Some(_) => Err(Error::InvalidArgument("the snapshot belongs to another database".into())),
        }
    }
}

/// Another handle on the same moment: the versions it reads stay until
/// every handle is dropped.
impl Clone for Snapshot {
    fn clone(&self) -> Snapshot {
        self.inner.snapshots.register_again(self.seqno);
        Snapshot { inner: self.inner.clone(), seqno: self.seqno, past: self.past }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.inner.snapshots.release(self.seqno);
        // A snapshot may have kept files a range tombstone covers: the
        // compaction thread drops them once it is gone (and waiters for
        // background work look again). Only where a tombstone is live.
        let sv = self.inner.versions.load();
        if sv.version.trees.values().any(|t| !t.range_tombstones.is_empty()) {
            self.inner.jobs.wake();
        }
    }
}

crate::options::option_struct! {
/// Options for one read.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions<'a> {
    /// Read as of this snapshot; `None` reads the latest committed state.
    pub snapshot: Option<&'a Snapshot>,
}
}
