//! Snapshots: a seqno that reads can be pinned to. Live snapshots are
//! registered so compaction keeps the versions they can see.

use std::ops::RangeBounds;
use std::sync::Arc;

use bytes::Bytes;

use crate::codec::internal::SeqNo;
use crate::db::read::iter::{self, DbIterator, Direction};
use crate::db::state::inner::DbInner;
use crate::error::{Error, Result};
use crate::ids::DEFAULT_TREE;

/// A consistent read-only view of the database at one moment.
pub struct Snapshot {
    inner: Arc<DbInner>,
    seqno: SeqNo,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seqno", &self.seqno).finish_non_exhaustive()
    }
}

impl Snapshot {
    pub(crate) fn new(inner: Arc<DbInner>) -> Snapshot {
        let seqno = inner.snapshots.register(|| inner.writer.visible_seqno());
        Snapshot { inner, seqno }
    }

    /// The seqno this snapshot reads at.
    pub fn seqno(&self) -> SeqNo {
        self.seqno
    }

    /// The value of `key` as of this snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.inner.get(DEFAULT_TREE, key.as_ref(), Some(self.seqno))
    }

    /// `f` of the value of `key` as of this snapshot, borrowed where it
    /// lies (see `Db::get_with`).
    pub fn get_with<R>(&self, key: impl AsRef<[u8]>, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        self.inner.get_with(DEFAULT_TREE, key.as_ref(), Some(self.seqno), None, |v| f(v.as_slice()))
    }

    /// Iterates over `range` as of this snapshot.
    pub fn iter<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>, direction: Direction) -> DbIterator {
        iter::new(&self.inner, DEFAULT_TREE, iter::owned_range(&range), direction, Some(self))
    }
}

impl DbInner {
    /// The seqno a read given `snapshot` takes (`None`: now). A snapshot
    /// of another database is refused: seqnos are per database, so it
    /// would read this one at a moment that never was.
    pub(crate) fn snapshot_seqno(&self, snapshot: Option<&Snapshot>) -> Result<Option<SeqNo>> {
        match snapshot {
            None => Ok(None),
            Some(s) if std::ptr::eq(Arc::as_ptr(&s.inner), self) => Ok(Some(s.seqno)),
            Some(_) => Err(Error::InvalidArgument("the snapshot belongs to another database".into())),
        }
    }
}

/// Another handle on the same moment: the versions it reads stay until
/// every handle is dropped.
impl Clone for Snapshot {
    fn clone(&self) -> Snapshot {
        self.inner.snapshots.register_again(self.seqno);
        Snapshot { inner: self.inner.clone(), seqno: self.seqno }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.inner.snapshots.release(self.seqno);
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
