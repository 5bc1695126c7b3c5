//! The key-value workload: each batch puts and deletes random keys of its
//! thread's key space (`kv/<thread>/<n>`), now and then a short range of
//! them at once (a range delete), and every value names the batch that
//! wrote it, so a half-applied batch shows which batch is torn. The
//! keyspace keeps a day of history: after every kill, its change feed
//! must hold each acknowledged batch's entries once, in commit order.

use std::collections::BTreeMap;

use std::time::Duration;

use basalt::{Db, HistoryWindow, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::workload::{Model, Workload, judge};

/// Keys per writer thread: small enough that batches overwrite and delete
/// each other's keys, so compactions drop versions and tombstones.
const KEYS_PER_THREAD: u32 = 2_000;

/// Entries per batch, at most.
const BATCH_ENTRIES_MAX: usize = 24;

/// One entry of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// Every key of `[start, end)`.
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// The key-value workload; see the module docs.
pub struct KvWorkload {
    seed: u64,
}

impl KvWorkload {
    pub fn new(seed: u64) -> KvWorkload {
        KvWorkload { seed }
    }
}

/// The keyspace of the batch counters (merge operator `add_i64`).
const COUNTS: &str = "kv_counts";

fn counter_key(thread: u32) -> Vec<u8> {
    format!("count/{thread:02}").into_bytes()
}

fn prefix(thread: u32) -> String {
    format!("kv/{thread:02}/")
}

/// The entries of batch `id` of `thread`, in order.
fn batch(seed: u64, thread: u32, id: u64) -> Vec<Entry> {
    let mut rng = StdRng::seed_from_u64(crate::mix(&[seed, 0x6b76, u64::from(thread), id]));
    let n = rng.random_range(1..=BATCH_ENTRIES_MAX);
    (0..n)
        .map(|_| {
            let first = rng.random_range(0..KEYS_PER_THREAD);
            let key = format!("{}{first:05}", prefix(thread)).into_bytes();
            if rng.random_bool(0.01) {
                let end = format!("{}{:05}", prefix(thread), first + rng.random_range(1..40)).into_bytes();
                return Entry::DeleteRange(key, end);
            }
            if rng.random_bool(0.15) {
                return Entry::Delete(key);
            }
            // Mostly small values; now and then a large one fills memtables.
            let filler =
                if rng.random_bool(0.03) { rng.random_range(1_000..6_000) } else { rng.random_range(0..120) };
            let mut value = format!("batch {id} of thread {thread}|").into_bytes();
            value.extend((0..filler).map(|_| rng.random_range(b'a'..=b'z')));
            Entry::Put(key, value)
        })
        .collect()
}

impl Workload for KvWorkload {
    fn name(&self) -> &'static str {
        "kv"
    }

    fn prepare(&self, db: &Db) -> basalt::Result<()> {
        // Idempotent: the same window again keeps its start, the same
        // operator again changes nothing.
        db.keyspace("default")?.set_history(HistoryWindow::duration(Duration::from_secs(86_400)))?;
        let counts = match db.keyspace(COUNTS) {
            Ok(k) => k,
            Err(_) => db.create_keyspace(COUNTS)?,
        };
        counts.set_merge_operator("add_i64")
    }

    fn write(&self, db: &Db, thread: u32, id: u64, sync: bool) -> basalt::Result<()> {
        let mut wb = WriteBatch::new();
        // Each batch also counts itself in its thread's counter: a merge
        // operand, folded by reads and compactions.
        wb.merge_keyspace(&db.keyspace(COUNTS)?, counter_key(thread), 1i64.to_le_bytes())?;
        for entry in batch(self.seed, thread, id) {
            match entry {
                Entry::Put(k, v) => wb.put(k, v),
                Entry::Delete(k) => wb.delete(k),
                Entry::DeleteRange(start, end) => wb.delete_range(start..end),
            }
        }
        db.write_opt(wb, &WriteOptions::default().sync(sync))
    }

    fn model(&self, thread: u32) -> Box<dyn Model> {
        Box::new(KvModel { seed: self.seed, thread, state: BTreeMap::new(), acked: 0 })
    }
}

/// The contents of one thread's key space after its confirmed batches.
struct KvModel {
    seed: u64,
    thread: u32,
    state: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Batches `0..acked` were applied.
    acked: u64,
}

fn apply(state: &mut BTreeMap<Vec<u8>, Vec<u8>>, entries: Vec<Entry>) {
    for entry in entries {
        match entry {
            Entry::Put(k, v) => {
                state.insert(k, v);
            }
            Entry::Delete(k) => {
                state.remove(&k);
            }
            Entry::DeleteRange(start, end) => state.retain(|k, _| *k < start || *k >= end),
        }
    }
}

/// Which batch wrote a value, for messages.
fn describe(value: Option<&Vec<u8>>) -> String {
    match value {
        None => "nothing".into(),
        Some(v) => {
            let text = String::from_utf8_lossy(v);
            format!("a value of {}", text.split('|').next().unwrap_or("?"))
        }
    }
}

impl Model for KvModel {
    fn apply(&mut self, id: u64) {
        apply(&mut self.state, batch(self.seed, self.thread, id));
        self.acked = self.acked.max(id + 1);
    }

    fn check(&self, db: &Db, pending: Option<u64>) -> Result<bool, String> {
        let mut got = BTreeMap::new();
        for item in db.prefix(prefix(self.thread)) {
            let (k, v) = item.map_err(|e| format!("kv thread {}: scan failed: {e}", self.thread))?;
            got.insert(k.to_vec(), v.to_vec());
        }
        let who = format!("kv thread {}", self.thread);
        let apply_pending = |state: &mut BTreeMap<_, _>, p| apply(state, batch(self.seed, self.thread, p));
        let present = judge(&who, &got, &self.state, pending, apply_pending, describe)?;
        // A pending batch that changes nothing (deletes of absent keys,
        // values rewritten as they were) leaves the contents silent on
        // whether it is there: the feed may then hold it or not.
        self.check_feed(db, pending, present)?;
        self.check_counter(db, pending, present)?;
        Ok(present)
    }
}

impl KvModel {
    /// The thread's counter folds one operand per batch in the database:
    /// the acknowledged ones, and the pending one when it is there (when
    /// the contents cannot tell, either).
    fn check_counter(&self, db: &Db, pending: Option<u64>, present: bool) -> Result<(), String> {
        let got = db
            .keyspace(COUNTS)
            .and_then(|k| k.get(counter_key(self.thread)))
            .map_err(|e| format!("kv thread {}: counter: {e}", self.thread))?
            .map_or(0, |v| i64::from_le_bytes(v.as_ref().try_into().unwrap_or([0; 8])));
        let acked = i64::try_from(self.acked).unwrap_or(i64::MAX);
        let silent = batch_changes_nothing(&self.state, self.seed, self.thread, pending);
        let ok = got == acked + i64::from(present) || (silent && pending.is_some() && got == acked + 1);
        if ok {
            return Ok(());
        }
        Err(format!(
            "kv thread {}: the counter folds {got} operands, the acknowledged batches are {acked} (pending {pending:?}, present {present})",
            self.thread
        ))
    }

    /// The change feed holds this thread's acknowledged batches (and the
    /// pending one, when it is in the database), each entry once, in
    /// commit order: nothing lost, repeated or reordered by a recovery.
    fn check_feed(&self, db: &Db, pending: Option<u64>, present: bool) -> Result<(), String> {
        if present {
            return self.feed_is(db, pending);
        }
        if batch_changes_nothing(&self.state, self.seed, self.thread, pending) {
            return self.feed_is(db, None).or_else(|_| self.feed_is(db, pending));
        }
        self.feed_is(db, None)
    }

    /// The feed holds exactly the acknowledged batches and `pending`.
    fn feed_is(&self, db: &Db, pending: Option<u64>) -> Result<(), String> {
        let prefix = prefix(self.thread);
        let changes = db
            .keyspace("default")
            .and_then(|k| k.changes(0, usize::MAX))
            .map_err(|e| format!("kv thread {}: change feed: {e}", self.thread))?;
        let got: Vec<Entry> = changes
            .into_iter()
            .filter(|c| c.key.starts_with(prefix.as_bytes()))
            .map(|c| match (c.range_end, c.value) {
                (Some(std::ops::Bound::Excluded(end)), _) => Entry::DeleteRange(c.key.to_vec(), end.to_vec()),
                // This workload's ranges all have an end.
                (Some(_), _) => Entry::DeleteRange(c.key.to_vec(), Vec::new()),
                (None, Some(v)) => Entry::Put(c.key.to_vec(), v.to_vec()),
                (None, None) => Entry::Delete(c.key.to_vec()),
            })
            .collect();
        let want: Vec<Entry> =
            (0..self.acked).chain(pending).flat_map(|id| batch(self.seed, self.thread, id)).collect();
        if got == want {
            return Ok(());
        }
        let at = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
        Err(format!(
            "kv thread {}: the change feed holds {} entries, the acknowledged batches {}; first difference at entry {at}",
            self.thread,
            got.len(),
            want.len()
        ))
    }
}

/// Whether batch `pending` of `thread`, applied to `state`, leaves it as it
/// was.
fn batch_changes_nothing(
    state: &BTreeMap<Vec<u8>, Vec<u8>>,
    seed: u64,
    thread: u32,
    pending: Option<u64>,
) -> bool {
    pending.is_some_and(|p| {
        let mut with = state.clone();
        apply(&mut with, batch(seed, thread, p));
        with == *state
    })
}
