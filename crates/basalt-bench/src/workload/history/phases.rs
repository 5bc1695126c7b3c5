//! The history workload's phases over any [`HistoryStore`]: the load, the
//! run (chunks alternating between the stores), the as-of reads, the
//! change feed and a key's history. Each checks what it reads.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rand::Rng;

use super::{
    ASOF_POINTS_MAX, ASOF_READS_MAX, CHUNK_OPS, FEED_BATCH_ROWS, HISTORY_CALLS, HISTORY_KEYS,
    HISTORY_VERSIONS, HistoryStore, LOAD_BATCH_ROWS, Rec,
};
use crate::datagen::{self, Chooser, Distribution, ValuePool};
use crate::engine::Result;
use crate::measure::Latencies;

/// Generator streams of the phases.
const RUN_STREAM: u64 = 0x6869_7374_0001;
const ASOF_STREAM: u64 = 0x6869_7374_0002;
const KEYS_STREAM: u64 = 0x6869_7374_0003;
/// As-of reads checked exactly (against the key's history) before the
/// timed ones.
const ASOF_VERIFIED: u64 = 500;

/// One operation of the run: a get expecting `version`, or an update
/// writing it.
#[derive(Debug, Clone, Copy)]
struct Op {
    id: u64,
    version: u64,
    update: bool,
}

/// The run's operations, the same for every store, and what they leave.
/// The update of operation `i` writes version `i + 1`; the load's rows
/// are version 0.
#[derive(Debug)]
pub struct Plan {
    n: u64,
    ops: Vec<Op>,
    /// Every update as (id, version), sorted: each key's versions in order.
    by_key: Vec<(u64, u64)>,
    /// Each item's version after the run.
    latest: Vec<u64>,
}

impl Plan {
    /// `ops` operations over `n` items, zipfian, half of them updates.
    pub fn new(n: u64, ops: u64, seed: u64) -> Result<Plan> {
        if n < 2 * HISTORY_KEYS as u64 || ops == 0 {
            return Err(format!("history: needs {} rows and one operation at least", 2 * HISTORY_KEYS).into());
        }
        let mut rng = datagen::rng(seed, RUN_STREAM);
        let mut chooser = Chooser::new(Distribution::Zipfian, n);
        let mut latest = vec![0u64; n as usize];
        let mut by_key = Vec::new();
        let plan_ops = (0..ops)
            .map(|i| {
                let id = chooser.next(&mut rng, n);
                if rng.random_range(0..100u32) < 50 {
                    latest[id as usize] = i + 1;
                    by_key.push((id, i + 1));
                    Op { id, version: i + 1, update: true }
                } else {
                    Op { id, version: latest[id as usize], update: false }
                }
            })
            .collect();
        by_key.sort_unstable();
        Ok(Plan { n, ops: plan_ops, by_key, latest })
    }

    /// Updates in the run.
    pub fn updates(&self) -> u64 {
        self.by_key.len() as u64
    }

    /// The version of `id` after the run's first `end` operations.
    fn version_after(&self, id: u64, end: u64) -> u64 {
        let at = self.by_key.partition_point(|&kv| kv <= (id, end));
        match at.checked_sub(1).map(|i| self.by_key[i]) {
            Some((k, v)) if k == id => v,
            _ => 0,
        }
    }

    /// The versions of `id` the run wrote, oldest first.
    fn versions_of(&self, id: u64) -> impl DoubleEndedIterator<Item = u64> + '_ {
        let lo = self.by_key.partition_point(|&(k, _)| k < id);
        let hi = self.by_key.partition_point(|&(k, _)| k <= id);
        self.by_key[lo..hi].iter().map(|&(_, v)| v)
    }
}

/// Loads rows `0..n` at version 0 into every store, batch by batch, and
/// settles them.
pub fn load(plan: &Plan, pool: &ValuePool, stores: &mut [&mut dyn HistoryStore]) -> Result<()> {
    let mut batch: Vec<Rec> = Vec::with_capacity(LOAD_BATCH_ROWS as usize);
    let mut id = 0;
    while id < plan.n {
        let end = (id + LOAD_BATCH_ROWS).min(plan.n);
        batch.resize_with((end - id) as usize, Rec::new);
        for (rec, i) in batch.iter_mut().zip(id..end) {
            rec.fill(pool, i, 0);
        }
        for s in stores.iter_mut() {
            s.load(&batch)?;
        }
        id = end;
    }
    stores.iter_mut().try_for_each(|s| s.settle())
}

/// What one store's run measured.
#[derive(Debug)]
pub struct RunStats {
    pub ops: u64,
    /// Wall time of the store's chunks.
    pub took: Duration,
    /// Time inside updates.
    pub update_time: Duration,
    pub updates: Latencies,
    pub gets: Latencies,
}

/// A point of the run: (operations done, the store's point after them).
pub type Point = (u64, u64);

/// Runs the plan's operations in both stores (`[off, on]`), chunk by
/// chunk, alternating which goes first. Returns each store's measurements
/// and, after each chunk of the second store, (operations done, its point).
pub fn run_ops(
    plan: &Plan,
    pool: &ValuePool,
    stores: &mut [&mut dyn HistoryStore; 2],
) -> Result<([RunStats; 2], Vec<Point>)> {
    let mut stats = std::array::from_fn(|_| RunStats {
        ops: 0,
        took: Duration::ZERO,
        update_time: Duration::ZERO,
        updates: Latencies::new(1),
        gets: Latencies::new(1),
    });
    let mut points = Vec::new();
    let mut rec = Rec::new();
    for (c, start) in (0..plan.ops.len() as u64).step_by(CHUNK_OPS as usize).enumerate() {
        let end = (start + CHUNK_OPS).min(plan.ops.len() as u64);
        let order = if c % 2 == 0 { [0, 1] } else { [1, 0] };
        for s in order {
            let ops = &plan.ops[start as usize..end as usize];
            run_chunk(ops, pool, &mut rec, &mut *stores[s], &mut stats[s])?;
            if s == 1 {
                points.push((end, stores[1].point()?));
            }
        }
    }
    Ok((stats, points))
}

fn run_chunk(
    ops: &[Op],
    pool: &ValuePool,
    rec: &mut Rec,
    store: &mut dyn HistoryStore,
    stats: &mut RunStats,
) -> Result<()> {
    let chunk = Instant::now();
    let mut wrong = None;
    for op in ops {
        if op.update {
            rec.fill(pool, op.id, op.version);
            let t = Instant::now();
            store.update(rec)?;
            let took = t.elapsed();
            stats.update_time += took;
            stats.updates.record(took);
        } else {
            let mut right = false;
            let t = Instant::now();
            let found = store.get(op.id as i64, &mut |row| right = row.is(op.id, op.version))?;
            stats.gets.record(t.elapsed());
            if !found || !right {
                wrong.get_or_insert(*op);
            }
        }
    }
    stats.took += chunk.elapsed();
    stats.ops += ops.len() as u64;
    match wrong {
        Some(op) => {
            Err(format!("history: a get of item {} did not return version {}", op.id, op.version).into())
        }
        None => Ok(()),
    }
}

/// Latencies of the reads after the run.
#[derive(Debug)]
pub struct AsOfStats {
    /// Current-value gets in each store (`[off, on]`), paired.
    pub current: [Latencies; 2],
    /// Current-value gets in the second store, paired with the as-of ones.
    pub current_beside_as_of: Latencies,
    /// Gets as of a past point (history on).
    pub as_of: Latencies,
    /// Opening a read as of a point (Basalt's `Db::snapshot_at`).
    pub open: Latencies,
}

/// Gets as of points of the run in the second store and current gets of
/// the same keys in both, after an untimed pass of the same reads. The first
/// [`ASOF_VERIFIED`] keys are checked exactly; every as-of read returns a
/// version between the one its point saw and the latest.
pub fn as_of_reads(
    plan: &Plan,
    seed: u64,
    stores: &mut [&mut dyn HistoryStore; 2],
    points: &[Point],
) -> Result<AsOfStats> {
    let past = &points[..points.len().saturating_sub(1)];
    if past.is_empty() {
        return Err(format!("history: the run needs more than {CHUNK_OPS} operations").into());
    }
    let mut rng = datagen::rng(seed, ASOF_STREAM);
    let mut chooser = Chooser::new(Distribution::Zipfian, plan.n);
    let reads = (plan.ops.len() as u64).clamp(past.len() as u64, ASOF_READS_MAX);
    let n_points = ASOF_POINTS_MAX.min(past.len());
    let per_point = reads / n_points as u64;
    let mut out = AsOfStats {
        current: [Latencies::new(1), Latencies::new(1)],
        current_beside_as_of: Latencies::new(1),
        as_of: Latencies::new(1),
        open: Latencies::new(1),
    };
    let mut verified = 0;
    let mut keys = Vec::with_capacity(per_point as usize);
    for p in 0..n_points {
        let (end, point) = past[rng.random_range(0..past.len())];
        let t = Instant::now();
        let at = stores[1].read_as_of(point)?;
        out.open.record(t.elapsed());
        keys.clear();
        keys.extend((0..per_point).map(|_| chooser.next(&mut rng, plan.n)));
        // Untimed, each key once in each series: every timed read finds
        // its pages mapped and cached, whichever series reads it first.
        let mut untimed = Latencies::new(1);
        for &id in &keys {
            if verified < ASOF_VERIFIED {
                verify_as_of(plan, stores[1], id, at)?;
                verified += 1;
            }
            current_get(plan, stores[0], id, &mut untimed)?;
            current_get(plan, stores[1], id, &mut untimed)?;
            as_of_get(plan, stores[1], id, end, &mut untimed)?;
        }
        // Two timed passes, each pairing reads that touch the same number
        // of blocks per key in each store: current gets in the two stores,
        // then current against as-of gets in the one keeping history (in
        // alternating order, so neither always follows the other).
        for (k, &id) in keys.iter().enumerate() {
            for s in if (k + p) % 2 == 0 { [0, 1] } else { [1, 0] } {
                current_get(plan, stores[s], id, &mut out.current[s])?;
            }
        }
        for (k, &id) in keys.iter().enumerate() {
            for r in if (k + p) % 2 == 0 { [0, 1] } else { [1, 0] } {
                if r == 0 {
                    current_get(plan, stores[1], id, &mut out.current_beside_as_of)?;
                } else {
                    as_of_get(plan, stores[1], id, end, &mut out.as_of)?;
                }
            }
        }
    }
    Ok(out)
}

fn current_get(plan: &Plan, store: &mut dyn HistoryStore, id: u64, lat: &mut Latencies) -> Result<()> {
    let version = plan.latest[id as usize];
    let mut right = false;
    let t = Instant::now();
    let found = store.get(id as i64, &mut |row| right = row.is(id, version))?;
    lat.record(t.elapsed());
    if found && right {
        Ok(())
    } else {
        Err(format!("history: a current get of item {id} did not return version {version}").into())
    }
}

fn as_of_get(
    plan: &Plan,
    store: &mut dyn HistoryStore,
    id: u64,
    end: u64,
    lat: &mut Latencies,
) -> Result<()> {
    let (oldest, newest) = (plan.version_after(id, end), plan.latest[id as usize]);
    let mut got = None;
    let t = Instant::now();
    store.get_as_of(id as i64, &mut |row| {
        let v = row.version as u64;
        got = Some((v, row.is(id, v)));
    })?;
    lat.record(t.elapsed());
    match got {
        Some((v, true)) if (oldest..=newest).contains(&v) => Ok(()),
        other => Err(format!(
            "history: item {id} as of operation {end} read {other:?}, expected a version in {oldest}..={newest}"
        )
        .into()),
    }
}

/// Checks that `id`'s history holds every version the harness wrote (and
/// the load's), newest first, and that a get as of `at` returns the
/// newest of them at or before `at`.
fn verify_as_of(plan: &Plan, store: &mut dyn HistoryStore, id: u64, at: u64) -> Result<()> {
    let mut kept = Vec::new();
    store.history(id as i64, &mut |point, key, row| {
        kept.push((point, key, row.map(|r| (r.version as u64, r.is(id, r.version as u64)))));
    })?;
    let expected: Vec<u64> = plan.versions_of(id).rev().chain([0]).collect();
    let got: Vec<Option<u64>> =
        kept.iter().map(|k| k.2.filter(|v| v.1 && k.1 == id as i64).map(|v| v.0)).collect();
    if got != expected.iter().map(|&v| Some(v)).collect::<Vec<_>>() {
        return Err(format!("history: item {id}'s history is {got:?}, expected {expected:?}").into());
    }
    let want = kept.iter().find(|k| k.0 <= at).and_then(|k| k.2).map(|v| v.0);
    let mut read = None;
    store.get_as_of(id as i64, &mut |row| read = Some(row.version as u64))?;
    if read == want {
        Ok(())
    } else {
        Err(format!("history: item {id} as of {at} read version {read:?}, its history says {want:?}").into())
    }
}

/// Reads every change after `since` from the second store's feed, checking
/// that they are the run's updates in order. Returns (changes, time).
pub fn feed(plan: &Plan, store: &mut dyn HistoryStore, since: u64) -> Result<(u64, Duration)> {
    let mut expected = plan.ops.iter().filter(|op| op.update);
    let (mut since, mut rows, mut wrong) = (since, 0u64, 0u64);
    let t = Instant::now();
    loop {
        let mut last = since;
        let n = store.changes(since, FEED_BATCH_ROWS, &mut |point, id, row| {
            let right = match (expected.next(), row) {
                (Some(op), Some(row)) => op.id as i64 == id && row.is(op.id, op.version),
                _ => false,
            };
            wrong += u64::from(!right || point <= last);
            last = point;
        })?;
        if n == 0 {
            break;
        }
        rows += n as u64;
        since = last;
    }
    let took = t.elapsed();
    if wrong > 0 || rows != plan.updates() {
        return Err(format!(
            "history: the feed returned {rows} changes ({wrong} wrong or out of order), the run made {}",
            plan.updates()
        )
        .into());
    }
    Ok((rows, took))
}

/// Writes [`HISTORY_KEYS`] keys the run left alone [`HISTORY_VERSIONS`]
/// times each, every write followed by one of another key, then times
/// reads of their histories: right after (in Basalt, in the memtable)
/// and after compaction (in SSTs). Returns the two latencies.
pub fn key_history(
    plan: &Plan,
    pool: &ValuePool,
    seed: u64,
    store: &mut dyn HistoryStore,
) -> Result<[Latencies; 2]> {
    let mut rng = datagen::rng(seed, KEYS_STREAM);
    let mut keys = Vec::new();
    let mut taken = HashSet::new();
    while keys.len() < HISTORY_KEYS {
        let id = rng.random_range(0..plan.n);
        if plan.latest[id as usize] == 0 && taken.insert(id) {
            keys.push(id);
        }
    }
    let mut rec = Rec::new();
    let mut version = plan.ops.len() as u64;
    let mut written: Vec<Vec<u64>> = vec![vec![0]; keys.len()];
    for _ in 0..HISTORY_VERSIONS {
        for (k, &id) in keys.iter().enumerate() {
            version += 1;
            rec.fill(pool, id, version);
            store.update(&rec)?;
            written[k].push(version);
            let other = loop {
                let o = rng.random_range(0..plan.n);
                if !taken.contains(&o) {
                    break o;
                }
            };
            version += 1;
            rec.fill(pool, other, version);
            store.update(&rec)?;
        }
    }
    let memtable = time_histories(store, &keys, &written)?;
    store.compact()?;
    let ssts = time_histories(store, &keys, &written)?;
    Ok([memtable, ssts])
}

/// Checks each key's whole history once, then times [`HISTORY_CALLS`]
/// reads of them (each checked for its length and newest version).
fn time_histories(store: &mut dyn HistoryStore, keys: &[u64], written: &[Vec<u64>]) -> Result<Latencies> {
    for (&id, versions) in keys.iter().zip(written) {
        let mut got = Vec::new();
        store.history(id as i64, &mut |_, _, row| {
            got.push(row.filter(|r| r.is(id, r.version as u64)).map(|r| r.version as u64));
        })?;
        let want: Vec<Option<u64>> = versions.iter().rev().map(|&v| Some(v)).collect();
        if got != want {
            return Err(format!("history: item {id}'s history is {got:?}, expected {want:?}").into());
        }
    }
    let mut lat = Latencies::new(1);
    for i in 0..HISTORY_CALLS {
        let k = (i % keys.len() as u64) as usize;
        let (id, newest) = (keys[k], written[k].last().copied().unwrap_or(0));
        let mut first = None;
        let t = Instant::now();
        let n = store.history(id as i64, &mut |_, _, row| {
            first.get_or_insert(row.map(|r| r.version as u64));
        })?;
        lat.record(t.elapsed());
        if n != written[k].len() || first != Some(Some(newest)) {
            return Err(format!("history: item {id}'s history had {n} versions, newest {first:?}").into());
        }
    }
    Ok(lat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_knows_each_version_at_each_point() {
        let plan = Plan::new(1_000, 5_000, 7).expect("plan");
        for op in plan.ops.iter().filter(|op| !op.update).take(500) {
            let i = plan.ops.iter().position(|o| std::ptr::eq(o, op)).expect("in the plan") as u64;
            assert_eq!(plan.version_after(op.id, i), op.version);
        }
        let id = plan.ops[0].id;
        let versions: Vec<u64> = plan.versions_of(id).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(plan.version_after(id, 5_000), plan.latest[id as usize]);
    }
}
