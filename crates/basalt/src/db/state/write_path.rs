//! The write path's state: the group-commit queue whose leader alone
//! appends to the WAL, the exclusive writer right, the WAL, and the seqnos
//! handed out and published. What a group does (conflict checks, index
//! upkeep, memtable inserts) is `write/commit.rs`'s; this file runs the
//! queue's protocol and owns its locks, which are taken here only.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Condvar;

use crate::codec::internal::SeqNo;
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::io::WritableFile;
use crate::log::writer::LogWriter;
use crate::ranked::{Rank, RankedMutex};
use crate::wal::batch::WriteBatch;

/// How long a writer waits for a leader whose group is not being synced by
/// spinning before it sleeps on the condition variable. Such a group is
/// done within microseconds (a WAL `write` and memtable inserts), and
/// sleeping costs a futex wait here and a wake in the leader, each a
/// system call and a context switch.
const LEADER_SPIN: Duration = Duration::from_micros(20);

/// The WAL starts the writeback of each MiB appended (as SSTs do,
/// `io/writeback.rs`), so the fsync that ends it at a memtable switch waits
/// for the last MiB rather than the whole file: a 64 MiB WAL's fsync held
/// the writer 50-110 ms, once per 64 MiB written.
const WAL_WRITEBACK_BYTES: u64 = 1 << 20;

/// One writer's request waiting in the queue.
pub(crate) struct Request {
    id: u64,
    pub batch: WriteBatch,
    pub sync: bool,
    /// Why the leader refused this batch alone (a unique index violation,
    /// a transaction's conflict): it is not logged, and its writer gets
    /// this error.
    pub rejected: Option<Error>,
    /// A transaction's commit: the keys whose newest version must still be
    /// the one its snapshot read.
    pub check: Option<ConflictCheck>,
}

impl Request {
    /// A request of the owner of the write path, which commits it as a
    /// group of its own (it never queues).
    pub(crate) fn owned(batch: WriteBatch) -> Request {
        Request { id: 0, batch, sync: false, rejected: None, check: None }
    }
}

/// What a transaction's commit checks before its batch is logged: no
/// version of any of `keys` newer than `snapshot` (committed since it
/// began, or earlier in the same group).
pub(crate) struct ConflictCheck {
    pub snapshot: SeqNo,
    pub keys: Vec<(TreeId, Vec<u8>)>,
}

/// The queue of writers and the leader flag.
#[derive(Default)]
struct WriteQueue {
    pending: VecDeque<Request>,
    /// Someone (a group leader, or the owner of the exclusive writer
    /// right) owns the WAL and the memtable insert path.
    leader_active: bool,
    /// The leader's group fsyncs the WAL: waiting for it is worth a sleep.
    leader_syncs: bool,
    results: HashMap<u64, Result<()>>,
    next_id: u64,
}

pub(crate) struct WritePath {
    queue: RankedMutex<WriteQueue>,
    /// Notified when a leader hands over (its group's results are in).
    handed_over: Condvar,
    /// The WAL; only the group-commit leader (or the owner of the
    /// exclusive writer right) touches it.
    wal: RankedMutex<LogWriter>,
    /// Last seqno assigned by the leader.
    last_seqno: AtomicU64,
    /// Last seqno whose writes are all in the memtable: the default snapshot.
    visible_seqno: AtomicU64,
    /// Delay owed by write groups in the soft zone, in nanoseconds (may be
    /// negative: time overslept). Short delays add up here and are slept
    /// once they reach a millisecond, as a sleep of tens of microseconds
    /// overshoots by as much again.
    delay_owed_ns: AtomicI64,
}

impl WritePath {
    /// A write path whose last write was `last_seqno`, appending to `wal`.
    pub(crate) fn new(wal: LogWriter, last_seqno: SeqNo) -> WritePath {
        WritePath {
            queue: RankedMutex::new(Rank::WriteQueue, WriteQueue::default()),
            handed_over: Condvar::new(),
            wal: RankedMutex::new(Rank::Wal, wal),
            last_seqno: AtomicU64::new(last_seqno),
            visible_seqno: AtomicU64::new(last_seqno),
            delay_owed_ns: AtomicI64::new(0),
        }
    }

    /// The last seqno handed out. Exact for the owner of the write path;
    /// a lower bound for anyone else.
    pub(crate) fn last_seqno(&self) -> SeqNo {
        self.last_seqno.load(Ordering::Relaxed)
    }

    /// The last seqno whose writes are all readable: the default snapshot.
    pub(crate) fn visible_seqno(&self) -> SeqNo {
        self.visible_seqno.load(Ordering::Acquire)
    }

    /// Makes every write up to `seqno` readable. Only the owner of the
    /// write path publishes, and seqnos only grow.
    pub(crate) fn publish(&self, seqno: SeqNo) {
        debug_assert!(seqno >= self.last_seqno(), "seqno {seqno} published after {}", self.last_seqno());
        self.last_seqno.store(seqno, Ordering::Relaxed);
        self.visible_seqno.store(seqno, Ordering::Release);
    }

    /// Queues `request` and returns its result: another writer's group
    /// carried it, or this writer led a group (`lead`, with the queue
    /// released) that did. A group takes requests from the front of the
    /// queue up to `group_bytes_max` (always at least one). A panic in
    /// `lead` is a bug; it must not leave the leader flag set (every later
    /// writer, and closing, would wait forever) or the group's writers
    /// without an answer: the group gets `on_panic()`'s error.
    pub(crate) fn commit(
        &self,
        batch: WriteBatch,
        sync: bool,
        check: Option<ConflictCheck>,
        group_bytes_max: usize,
        mut lead: impl FnMut(&mut [Request]) -> Result<()>,
        on_panic: impl Fn() -> Error,
    ) -> Result<()> {
        let mut q = self.queue.lock();
        let id = q.next_id;
        q.next_id += 1;
        q.pending.push_back(Request { id, batch, sync, rejected: None, check });
        let mut spinning_since: Option<Instant> = None;
        loop {
            if let Some(result) = q.results.remove(&id) {
                return result;
            }
            if q.leader_active {
                let since = *spinning_since.get_or_insert_with(Instant::now);
                if !q.leader_syncs && since.elapsed() < LEADER_SPIN {
                    q.unlocked(|| {
                        (0..16).for_each(|_| std::hint::spin_loop());
                    });
                } else {
                    q.wait(&self.handed_over);
                }
                continue;
            }
            q.leader_active = true;
            let mut group = take_group(&mut q.pending, group_bytes_max);
            // The group may not hold this writer's own request (the front
            // of the queue filled it): it leads, and waits for its own turn.
            q.leader_syncs = group.iter().any(|r| r.sync);
            let outcome = q.unlocked(|| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lead(&mut group)))
                    .unwrap_or_else(|_| Err(on_panic()))
            });
            for r in &mut group {
                let result = match (&outcome, r.rejected.take()) {
                    (Err(e), _) => Err(e.duplicate()),
                    (Ok(()), Some(refused)) => Err(refused),
                    (Ok(()), None) => Ok(()),
                };
                q.results.insert(r.id, result);
            }
            q.leader_active = false;
            self.handed_over.notify_all();
        }
    }

    /// Runs `f` while owning the write path: no group commits in between.
    /// A panic in `f` (a bug, or a panicking `Fs`) still gives the write
    /// path back, or every later writer, and closing, would wait forever;
    /// `on_panic` runs first (it stops writes, as `f` may have left its
    /// work half done).
    pub(crate) fn exclusive<T>(&self, f: impl FnOnce() -> T, on_panic: impl Fn()) -> T {
        /// Gives the write path back when dropped, on return or unwinding.
        struct Release<'a, P: Fn()>(&'a WritePath, P);
        impl<P: Fn()> Drop for Release<'_, P> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    (self.1)();
                }
                let mut q = self.0.queue.lock();
                q.leader_active = false;
                self.0.handed_over.notify_all();
            }
        }
        {
            let mut q = self.queue.lock();
            while q.leader_active {
                q.wait(&self.handed_over);
            }
            q.leader_active = true;
            // An exclusive owner may fsync or switch memtables: writers
            // waiting for it sleep rather than spin.
            q.leader_syncs = true;
        }
        let _release = Release(self, on_panic);
        f()
    }

    /// Appends the group's accepted batches to the WAL in one write, sealed
    /// with their commit time `unix_ms`, synced if `sync`; returns the
    /// bytes appended. The caller owns the write path; on an error the WAL
    /// may hold part of the group.
    pub(crate) fn append(&self, group: &[Request], sync: bool, unix_ms: u64) -> Result<u64> {
        let mut wal = self.wal.lock();
        let before = wal.len();
        wal.append_timed(
            group.iter().filter(|r| r.rejected.is_none()).map(|r| r.batch.sealed_bytes()),
            unix_ms,
        )?;
        if sync {
            wal.sync()?;
        }
        Ok(wal.len() - before)
    }

    /// Bytes appended to the WAL so far. The caller owns the write path.
    pub(crate) fn wal_len(&self) -> u64 {
        self.wal.lock().len()
    }

    /// Syncs the WAL. The caller owns the write path.
    pub(crate) fn sync_wal(&self) -> Result<()> {
        self.wal.lock().sync()
    }

    /// Appends from now on to `file`, a new WAL, after syncing the old one
    /// so that no unsynced write in it can be lost while a later synced
    /// write in the new one survives (a hole). The caller owns the write
    /// path.
    pub(crate) fn switch_wal(&self, file: Box<dyn WritableFile>) -> Result<()> {
        let mut wal = self.wal.lock();
        wal.sync()?;
        *wal = wal_writer(file);
        Ok(())
    }

    /// Appends from now on to `file` (recovery's new WAL, the old one being
    /// a placeholder). The caller owns the write path.
    pub(crate) fn replace_wal(&self, file: Box<dyn WritableFile>) {
        *self.wal.lock() = wal_writer(file);
    }

    /// Adds `d` to the delay owed and sleeps it off once it reaches a
    /// millisecond, counting what the sleep overshot against later delays;
    /// returns the time slept. Only the owner of the write path calls this.
    pub(crate) fn sleep_owed(&self, d: Duration) -> Duration {
        const SLEEP_AT_NS: i64 = 1_000_000;
        let owed = &self.delay_owed_ns;
        let due =
            owed.load(Ordering::Relaxed).saturating_add(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        if due < SLEEP_AT_NS {
            owed.store(due, Ordering::Relaxed);
            return Duration::ZERO;
        }
        let start = Instant::now();
        std::thread::sleep(Duration::from_nanos(due.unsigned_abs()));
        let took = start.elapsed();
        let slept = i64::try_from(took.as_nanos()).unwrap_or(i64::MAX);
        // Oversleeping is paid back by later groups, up to a millisecond.
        owed.store(due.saturating_sub(slept).max(-SLEEP_AT_NS), Ordering::Relaxed);
        took
    }
}

/// Takes requests from the front of the queue up to `bytes_max` (always
/// at least one).
fn take_group(pending: &mut VecDeque<Request>, bytes_max: usize) -> Vec<Request> {
    let mut group = Vec::new();
    let mut bytes = 0;
    while let Some(r) = pending.front() {
        if !group.is_empty() && bytes + r.batch.encoded_len() > bytes_max {
            break;
        }
        bytes += r.batch.encoded_len();
        group.extend(pending.pop_front());
    }
    group
}

/// A WAL's writer: its file starts its writeback every
/// [`WAL_WRITEBACK_BYTES`].
fn wal_writer(file: Box<dyn WritableFile>) -> LogWriter {
    LogWriter::new(Box::new(crate::io::WritebackEvery::new(file, WAL_WRITEBACK_BYTES)))
}
