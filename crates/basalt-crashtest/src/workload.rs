//! What the kill test writes and checks. A workload runs one or more writer
//! threads in the writer process; the driver keeps one [`Model`] per thread
//! and checks the reopened database against it after every kill.
//!
//! To cover a new feature, add a workload whose
//! batches exercise it and whose model checks it, and list it in [`ALL`].

use std::collections::{BTreeMap, BTreeSet};

use basalt::Db;

/// A kind of batch a writer thread commits, and the check of its results.
pub trait Workload: Send + Sync {
    /// The name used on the command line and in log file names.
    fn name(&self) -> &'static str;

    /// Runs once in each writer process after the database opens, before
    /// any thread writes (for example to create tables). Must be idempotent.
    fn prepare(&self, _db: &Db) -> basalt::Result<()> {
        Ok(())
    }

    /// Commits batch `id` of writer `thread` as one atomic write. Its
    /// contents depend only on the workload's seed, `thread` and `id`, so a
    /// batch lost in a kill is written again identically.
    fn write(&self, db: &Db, thread: u32, id: u64, sync: bool) -> basalt::Result<()>;

    /// The expected state of writer `thread` before its first batch.
    fn model(&self, thread: u32) -> Box<dyn Model>;
}

/// The expected state of one writer thread.
pub trait Model: Send {
    /// Adds batch `id`, known to be in the database, to the expected state.
    fn apply(&mut self, id: u64);

    /// Compares what `db` holds of this thread with the expected state:
    /// every acknowledged batch, and `pending` wholly or not at all. Returns
    /// whether `pending` is there; an error describes the difference.
    fn check(&self, db: &Db, pending: Option<u64>) -> Result<bool, String>;
}

/// The names of every workload.
pub const ALL: [&str; 4] = ["kv", "tables", "indexed", "transfers"];

/// The workload called `name`, seeded with `seed`.
pub fn by_name(name: &str, seed: u64) -> Option<Box<dyn Workload>> {
    match name {
        "kv" => Some(Box::new(crate::kv::KvWorkload::new(seed))),
        "tables" => Some(Box::new(crate::tables::TablesWorkload::new(seed))),
        "indexed" => Some(Box::new(crate::indexed::IndexedWorkload::new(seed))),
        "transfers" => Some(Box::new(crate::transfers::TransfersWorkload::new(seed))),
        _ => None,
    }
}

/// Applies a batch's changes (key → new rendering, `None` for a delete)
/// to a model's state, in order.
pub fn apply_changes<K: Ord>(state: &mut BTreeMap<K, String>, changes: Vec<(K, Option<String>)>) {
    for (key, value) in changes {
        match value {
            Some(v) => state.insert(key, v),
            None => state.remove(&key),
        };
    }
}

/// The verdict on one thread's data: `got` must be `acked` (the state after
/// the acknowledged batches), or `acked` with the pending batch applied by
/// `apply_pending`. Returns whether the pending batch is there; an error
/// names `who` and the first differences, described by `describe`.
pub fn judge<K: Ord + Clone + std::fmt::Debug, V: PartialEq + Clone>(
    who: &str,
    got: &BTreeMap<K, V>,
    acked: &BTreeMap<K, V>,
    pending: Option<u64>,
    apply_pending: impl FnOnce(&mut BTreeMap<K, V>, u64),
    describe: impl Fn(Option<&V>) -> String,
) -> Result<bool, String> {
    if got == acked {
        return Ok(false);
    }
    if let Some(p) = pending {
        let mut with = acked.clone();
        apply_pending(&mut with, p);
        if *got == with {
            return Ok(true);
        }
    }
    let keys: BTreeSet<&K> = got.keys().chain(acked.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != acked.get(*k))
        .take(6)
        .map(|k| format!("{k:?}: database has {}, expected {}", describe(got.get(k)), describe(acked.get(k))))
        .collect();
    Err(format!(
        "{who}: contents are neither the acknowledged batches{}: {}",
        pending.map_or(String::new(), |p| format!(" nor them plus pending batch {p}")),
        diffs.join("; ")
    ))
}
