use super::super::Workload;
use super::phases::{Plan, run_store};
use super::*;

fn job(engine: Kind) -> Job {
    let mut job = super::super::tests::job(Workload::RangeDelete, 2_000, &[]);
    job.engine = engine;
    job.ops = 200;
    job.distribution = datagen::Distribution::Sequential;
    job
}

#[test]
fn a_plan_deletes_disjoint_tenths_around_the_middle() {
    let plan = Plan::new(10_000_000, 10, 7).expect("plan");
    assert_eq!(plan.middle(), (4_500_000, 5_500_000));
    assert_eq!(plan.width(), 1_000_000);
    assert_eq!(plan.across, (4_000_000, 6_000_000));
    assert_eq!(plan.ranges.len(), RANGES_MAX);
    let mut sorted = plan.ranges.clone();
    sorted.sort_unstable();
    assert!(sorted.windows(2).all(|w| w[0].1 <= w[1].0), "disjoint: {sorted:?}");
    assert!(sorted.iter().all(|&(lo, hi)| lo >= 0 && hi <= 10_000_000 && hi - lo == 1_000_000));
    assert!(plan.gets.iter().all(|id| (4_500_000..5_500_000).contains(id)));
    assert!(Plan::new(99, 10, 7).is_err());
}

#[test]
fn every_store_measures_every_phase_and_checks_every_read() {
    for engine in [Kind::Basalt, Kind::Sqlite] {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = job(engine);
        let mut sink = Sink::new(&j);
        run(&j, dir.path(), &mut sink).unwrap_or_else(|e| panic!("{}: {e}", engine.name()));
        let stores: &[&str] = if engine == Kind::Basalt { &["basalt", ROWS_ENGINE] } else { &["sqlite"] };
        for &store in stores {
            let value = |metric: &str| {
                sink.records
                    .iter()
                    .find(|r| r.engine == store && r.metric == metric)
                    .unwrap_or_else(|| panic!("{store}: no {metric}"))
                    .value
            };
            for metric in [
                "delete_ms",
                "delete_p99_ms",
                "count_deleted_us",
                "get_deleted_p50_us",
                "scan_across_deleted_ms",
                "disk_compacted_bytes",
            ] {
                assert!(value(metric) > 0.0, "{store} {metric}");
            }
            assert_eq!(value("delete_ranges") as usize, RANGES_MAX, "{store}");
            assert_eq!(value("scan_across_deleted_rows") as u64, 200, "{store}");
            assert!(value("disk_compacted_bytes") < value("disk_before_bytes"), "{store}: space comes back");
            if store == "basalt" {
                assert_eq!(value("range_tombstones_deleted") as u64, 1);
                assert_eq!(
                    value("range_tombstones_compacted") as u64,
                    0,
                    "compaction collects the tombstone"
                );
            }
        }
        assert!(!dir.path().join("range").exists() && !dir.path().join("sqlite").exists(), "removed");
    }
}

/// How a broken store breaks.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// The delete leaves the range's last row.
    ShortDelete,
    /// Scans skip every hundredth row.
    ScanSkips,
    /// Gets of deleted rows find them (an old version).
    StaleGets,
}

/// Basalt's range store with one fault.
struct Broken {
    inner: super::basalt::BasaltStore,
    fault: Fault,
    pool: ValuePool,
    deleted: bool,
}

impl RangeStore for Broken {
    fn load(&mut self, rows: &[Rec]) -> Result<()> {
        self.inner.load(rows)
    }
    fn settle(&mut self) -> Result<()> {
        self.inner.settle()
    }
    fn delete(&mut self, lo: i64, hi: i64) -> Result<()> {
        self.deleted = true;
        self.inner.delete(lo, if self.fault == Fault::ShortDelete { hi - 1 } else { hi })
    }
    fn count(&mut self, lo: i64, hi: i64) -> Result<u64> {
        self.inner.count(lo, hi)
    }
    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
        if self.fault == Fault::StaleGets && self.deleted {
            let mut rec = Rec::new();
            rec.fill(&self.pool, id as u64);
            visit(RowView { id, qty: rec.qty, price: rec.price, payload: &rec.payload });
            return Ok(true);
        }
        self.inner.get(id, visit)
    }
    fn scan(&mut self, lo: i64, hi: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<u64> {
        let skips = self.fault == Fault::ScanSkips;
        let mut n = 0;
        self.inner.scan(lo, hi, &mut |row| {
            if !skips || row.id % 100 != 0 {
                visit(row);
                n += 1;
            }
        })?;
        Ok(n)
    }
    fn compact(&mut self) -> Result<()> {
        self.inner.compact()
    }
    fn tombstones(&self) -> Option<TombstoneStats> {
        self.inner.tombstones()
    }
}

#[test]
fn a_store_that_deletes_or_reads_wrong_fails_the_workload() {
    let j = job(Kind::Basalt);
    let plan = Plan::new(j.scale, j.ops, j.seed).expect("plan");
    let pool = ValuePool::new(j.seed);
    for (fault, says) in
        [(Fault::ShortDelete, "counts 1 rows"), (Fault::ScanSkips, "a scan"), (Fault::StaleGets, "a get")]
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let inner = super::basalt::BasaltStore::open(dir.path(), &j.config(true), false).expect("open");
        let mut store = Broken { inner, fault, pool: pool.clone(), deleted: false };
        let err =
            run_store(&plan, &pool, &mut store, dir.path()).expect_err("a broken store fails").to_string();
        assert!(err.contains(says), "{err}");
    }
}
