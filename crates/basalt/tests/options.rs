//! Random option sets: each seed sets some fields of `Options` to zeros,
//! ones, extremes (`usize::MAX`, `u32::MAX`) and values that invert a pair
//! (`l0_files_stop` at or below `l0_compaction_trigger`, a soft percent
//! over 100, a budget below the memtable size, ...). Each set must either
//! be refused by `Db::open` with `Error::InvalidArgument` naming one of
//! the fields it changed, or work: writes within the size limits are
//! acknowledged and the others refused with `InvalidArgument`, and
//! everything reads back through flush, `compact_range` and reopen. Each
//! case runs under a time limit, so a hang is a failure that names its
//! seed and options. `BASALT_SEED` replays one seed, `BASALT_CASES` runs
//! more.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::MemFs;
use basalt::{Compression, Db, Error, Options, ScanOptions, Table, TableOptions, WriteBatch};
use common::limit::{LIMIT, Limited, spawn_limited};
use common::{Model, rng, seeds};
use rand::Rng;
use rand::rngs::StdRng;

const DB: &str = "/db";

/// Key-value writes per case, in batches of `KV_BATCH`.
const KV_KEYS: u64 = 2_000;
const KV_BATCH: u64 = 10;
/// Table rows per case, in batches of `TABLE_BATCH`.
const TABLE_ROWS: u64 = 500;
const TABLE_BATCH: u64 = 50;

/// A case that makes no progress (no write, flush, compaction or open
/// returns) for `LIMIT` hangs. Some legal sets are slow as a whole: a
/// 64-byte write buffer makes one-key SSTs that compaction moves down one
/// MANIFEST edit at a time, so such a case takes about 8 s, with writers
/// stalled up to 2.3 s at once; this bounds the whole case.
const CASE_LIMIT: Duration = Duration::from_secs(40);

/// Most hanging cases waited for before the rest are skipped: each costs
/// the whole limit.
const HANGS_MAX: usize = 3;

/// A value for one field.
#[derive(Clone, Copy, Debug)]
enum V {
    Usize(usize),
    U32(u32),
    U64(u64),
    Bool(bool),
    Lz4,
    Zstd,
}

const KIB: usize = 1 << 10;
const MAX: V = V::Usize(usize::MAX);

/// The fields varied and the values drawn for each: zeros, ones, small
/// values that make every mechanism run, and extremes.
fn field_values() -> Vec<(&'static str, Vec<V>)> {
    use V::{Bool, U32, U64, Usize};
    vec![
        ("memtable_bytes_max", vec![Usize(0), Usize(1), Usize(64), Usize(4 * KIB), Usize(64 * KIB), MAX]),
        ("immutable_memtables_max", vec![Usize(0), Usize(1), Usize(2), MAX]),
        (
            "write_buffer_bytes_max",
            vec![Usize(0), Usize(1), Usize(64), Usize(16 * KIB), Usize(KIB * KIB), MAX],
        ),
        ("write_buffer_soft_percent", vec![U32(0), U32(1), U32(50), U32(100), U32(101), U32(u32::MAX)]),
        ("delayed_write_bytes_per_sec", vec![U64(0), U64(1), U64(1 << 20), U64(u64::MAX)]),
        ("l0_compaction_trigger", vec![Usize(0), Usize(1), Usize(2), MAX]),
        ("l0_files_slowdown", vec![Usize(0), Usize(1), Usize(2), Usize(30), MAX]),
        ("l0_files_stop", vec![Usize(0), Usize(1), Usize(2), Usize(3), MAX]),
        ("level1_bytes_target", vec![Usize(1), Usize(KIB), MAX]),
        ("level_size_ratio", vec![U32(0), U32(1), U32(2), U32(u32::MAX)]),
        ("sst_bytes_target", vec![Usize(1), Usize(KIB), MAX]),
        ("learned_index", vec![Bool(false)]),
        ("learned_index_epsilon", vec![U32(0), U32(1), U32(u32::MAX)]),
        ("timing_stats", vec![Bool(true)]),
        ("auto_compaction", vec![Bool(false)]),
        ("block_bytes_target", vec![Usize(0), Usize(1), Usize(32), MAX]),
        ("table_block_bytes_target", vec![Usize(0), Usize(1), Usize(32), MAX]),
        ("settled_block_bytes_target", vec![Usize(0), Usize(1), Usize(32), MAX]),
        ("bloom_bits_per_key", vec![U32(1), U32(100), U32(u32::MAX)]),
        ("compression", vec![V::Lz4, V::Zstd]),
        ("index_compression", vec![V::Lz4, V::Zstd]),
        ("settled_compression", vec![V::Zstd, V::Lz4]),
        ("string_dictionaries", vec![Bool(false)]),
        ("block_cache_bytes", vec![Usize(0), Usize(1), MAX]),
        ("row_cache_bytes", vec![Usize(1), Usize(64 * KIB), MAX]),
        ("mmap_reads", vec![Bool(false)]),
        ("max_open_files", vec![Usize(1), Usize(2), MAX]),
        ("key_bytes_max", vec![Usize(0), Usize(1), Usize(2), Usize(8), MAX]),
        ("value_bytes_max", vec![Usize(0), Usize(1), Usize(8), MAX]),
        ("batch_bytes_max", vec![Usize(0), Usize(1), Usize(100), Usize(64 * KIB), MAX]),
        ("group_commit_bytes_max", vec![Usize(0), Usize(1), MAX]),
        ("blob_value_bytes_min", vec![Usize(1), Usize(8), Usize(KIB), MAX]),
        ("blob_gc_garbage_percent", vec![U32(0), U32(1), U32(50), U32(100), U32(101), U32(u32::MAX)]),
    ]
}

/// Sets field `name` of `o` to `v`.
fn set(o: &mut Options, name: &str, v: V) {
    match (name, v) {
        ("memtable_bytes_max", V::Usize(x)) => o.memtable_bytes_max = x,
        ("immutable_memtables_max", V::Usize(x)) => o.immutable_memtables_max = x,
        ("write_buffer_bytes_max", V::Usize(x)) => o.write_buffer_bytes_max = x,
        ("write_buffer_soft_percent", V::U32(x)) => o.write_buffer_soft_percent = x,
        ("delayed_write_bytes_per_sec", V::U64(x)) => o.delayed_write_bytes_per_sec = x,
        ("l0_compaction_trigger", V::Usize(x)) => o.l0_compaction_trigger = x,
        ("l0_files_slowdown", V::Usize(x)) => o.l0_files_slowdown = x,
        ("l0_files_stop", V::Usize(x)) => o.l0_files_stop = x,
        ("level1_bytes_target", V::Usize(x)) => o.level1_bytes_target = x,
        ("level_size_ratio", V::U32(x)) => o.level_size_ratio = x,
        ("sst_bytes_target", V::Usize(x)) => o.sst_bytes_target = x,
        ("learned_index", V::Bool(x)) => o.learned_index = x,
        ("learned_index_epsilon", V::U32(x)) => o.learned_index_epsilon = x,
        ("timing_stats", V::Bool(x)) => o.timing_stats = x,
        ("auto_compaction", V::Bool(x)) => o.auto_compaction = x,
        ("block_bytes_target", V::Usize(x)) => o.block_bytes_target = x,
        ("table_block_bytes_target", V::Usize(x)) => o.table_block_bytes_target = x,
        ("settled_block_bytes_target", V::Usize(x)) => o.settled_block_bytes_target = x,
        ("bloom_bits_per_key", V::U32(x)) => o.bloom_bits_per_key = x,
        ("compression", V::Lz4) => o.compression = Compression::Lz4,
        ("compression", V::Zstd) => o.compression = Compression::Zstd,
        ("index_compression", V::Lz4) => o.index_compression = Compression::Lz4,
        ("index_compression", V::Zstd) => o.index_compression = Compression::Zstd,
        ("settled_compression", V::Zstd) => o.settled_compression = Compression::Zstd,
        ("settled_compression", V::Lz4) => o.settled_compression = Compression::Lz4,
        ("string_dictionaries", V::Bool(x)) => o.string_dictionaries = x,
        ("block_cache_bytes", V::Usize(x)) => o.block_cache_bytes = x,
        ("row_cache_bytes", V::Usize(x)) => o.row_cache_bytes = x,
        ("mmap_reads", V::Bool(x)) => o.mmap_reads = x,
        ("max_open_files", V::Usize(x)) => o.max_open_files = x,
        ("key_bytes_max", V::Usize(x)) => o.key_bytes_max = x,
        ("value_bytes_max", V::Usize(x)) => o.value_bytes_max = x,
        ("blob_value_bytes_min", V::Usize(x)) => o.blob_value_bytes_min = x,
        ("blob_gc_garbage_percent", V::U32(x)) => o.blob_gc_garbage_percent = x,
        ("batch_bytes_max", V::Usize(x)) => o.batch_bytes_max = x,
        ("group_commit_bytes_max", V::Usize(x)) => o.group_commit_bytes_max = x,
        _ => panic!("no field {name} taking {v:?}"),
    }
}

/// An option set: the fields changed from the defaults, on `MemFs`.
#[derive(Clone, Debug)]
struct Case {
    changed: Vec<(&'static str, V)>,
}

impl Case {
    fn random(rng: &mut StdRng) -> Case {
        // About three fields per set: enough to combine, few enough that
        // some sets pass validation.
        let mut changed = Vec::new();
        for (name, values) in field_values() {
            if rng.random_bool(0.12) {
                changed.push((name, values[rng.random_range(0..values.len())]));
            }
        }
        Case { changed }
    }

    fn options(&self, fs: &MemFs) -> Options {
        let mut o = Options::default().fs(Arc::new(fs.clone()));
        for &(name, v) in &self.changed {
            set(&mut o, name, v);
        }
        o
    }

    fn describe(&self) -> String {
        let mut s = String::from("Options {");
        for (name, v) in &self.changed {
            let v = match v {
                V::Usize(usize::MAX) => "usize::MAX".to_string(),
                V::U32(u32::MAX) => "u32::MAX".to_string(),
                V::U64(u64::MAX) => "u64::MAX".to_string(),
                V::Usize(x) => x.to_string(),
                V::U32(x) => x.to_string(),
                V::U64(x) => x.to_string(),
                V::Bool(x) => x.to_string(),
                V::Lz4 => "Compression::Lz4".to_string(),
                V::Zstd => "Compression::Zstd".to_string(),
            };
            let _ = write!(s, " {name}: {v},");
        }
        s + " .. }"
    }
}

/// How a case ended when it did not fail.
#[derive(Debug, PartialEq)]
enum Verdict {
    Refused,
    Worked,
}

fn table_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
    ]))
}

/// The `i`-th key of `len` bytes: the low bytes of `i` (keys shorter than
/// 8 bytes wrap around and overwrite), padded with `k` in front.
fn kv_key(i: u64, len: usize) -> Vec<u8> {
    let be = i.to_be_bytes();
    let mut k = vec![b'k'; len.saturating_sub(8)];
    k.extend_from_slice(&be[8 - len.min(8)..]);
    k
}

fn kv_value(i: u64, len: usize) -> Vec<u8> {
    format!("v{i:015}").into_bytes().into_iter().cycle().take(len).collect()
}

/// The `i`-th table key of `len` bytes (decimal digits, wrapping).
fn table_key(i: u64, len: usize) -> String {
    let digits = format!("{i:012}");
    digits[12 - len.min(12)..].to_string()
}

/// What the workload expects of one write.
fn admissible(o: &Options, key_len: usize, value_len: usize, batch: &WriteBatch) -> bool {
    key_len <= o.key_bytes_max && value_len <= o.value_bytes_max && batch.encoded_len() <= o.batch_bytes_max
}

/// Whether a table row may be refused for its size: how many bytes a row
/// of `(Utf8 key, Int64)` encodes to is the engine's business, but it is
/// under 64 bytes here, so only a smaller `value_bytes_max` may refuse it,
/// and the refusal must name it.
fn row_may_be_refused(o: &Options, msg: &str) -> bool {
    o.value_bytes_max < 64 && msg.contains("value_bytes_max")
}

/// Submits `batch`: acknowledged when `expect_ok`, else refused with
/// `InvalidArgument`.
fn submit(db: &Db, batch: WriteBatch, expect_ok: bool, what: &str) -> Result<bool, String> {
    match (db.write(batch), expect_ok) {
        (Ok(()), true) => Ok(true),
        (Err(Error::InvalidArgument(_)), false) => Ok(false),
        (Ok(()), false) => Err(format!("{what}: acknowledged, but it exceeds a size limit")),
        (Err(e), _) => {
            Err(format!("{what}: expected {}, got {e}", if expect_ok { "Ok" } else { "InvalidArgument" }))
        }
    }
}

/// Writes key-value batches `range` (in groups of `KV_BATCH`), recording
/// what was acknowledged in `model`.
fn write_kv(
    db: &Db,
    o: &Options,
    range: std::ops::Range<u64>,
    model: &mut Model,
    p: &Progress,
) -> Result<(), String> {
    let (key_len, value_len) = (o.key_bytes_max.min(12), o.value_bytes_max.min(16));
    for start in range.step_by(KV_BATCH as usize) {
        let mut batch = WriteBatch::new();
        let entries: Vec<(Vec<u8>, Vec<u8>)> =
            (start..start + KV_BATCH).map(|i| (kv_key(i, key_len), kv_value(i, value_len))).collect();
        for (k, v) in &entries {
            batch.put(k, v);
        }
        let ok = admissible(o, key_len, value_len, &batch);
        if submit(db, batch, ok, &format!("key-value batch at {start}"))? {
            model.extend(entries);
        }
        p.step();
    }
    Ok(())
}

/// Writes table rows `range` (in groups of `TABLE_BATCH`) into `model`.
fn write_table(
    db: &Db,
    t: &Table,
    o: &Options,
    range: std::ops::Range<u64>,
    model: &mut BTreeMap<String, i64>,
    p: &Progress,
) -> Result<(), String> {
    let key_len = o.key_bytes_max.min(12);
    for start in range.step_by(TABLE_BATCH as usize) {
        let rows: Vec<(String, i64)> =
            (start..start + TABLE_BATCH).map(|i| (table_key(i, key_len), i as i64)).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(rows.iter().map(|r| r.0.clone()).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
        ];
        let batch = RecordBatch::try_new(table_schema(), cols).expect("table batch");
        let what = format!("table batch at {start}");
        p.step();
        let mut wb = WriteBatch::new();
        match wb.put_table(t, &batch) {
            Ok(()) => {}
            Err(Error::InvalidArgument(msg)) if row_may_be_refused(o, &msg) => continue,
            Err(e) => return Err(format!("{what}: put_table: {e}")),
        }
        let ok = admissible(o, key_len, 0, &wb);
        match db.write(wb) {
            Ok(()) if ok => model.extend(rows),
            Err(Error::InvalidArgument(msg)) if !ok || row_may_be_refused(o, &msg) => {}
            Ok(()) => return Err(format!("{what}: acknowledged, but it exceeds a size limit")),
            Err(e) => return Err(format!("{what}: expected Ok, got {e}")),
        }
    }
    Ok(())
}

fn table_rows(t: &Table) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for b in t.scan(ScanOptions::default()).map_err(|e| format!("scan: {e}"))? {
        let b = b.map_err(|e| format!("scan batch: {e}"))?;
        let (k, n) = (b.column(0).as_string::<i32>(), b.column(1).as_primitive::<Int64Type>());
        for i in 0..b.num_rows() {
            out.insert(k.value(i).to_string(), n.value(i));
        }
    }
    Ok(out)
}

/// Reads the key-value store (scan and point gets) and the table back.
fn check_contents(db: &Db, kv: &Model, rows: &BTreeMap<String, i64>, when: &str) -> Result<(), String> {
    let mut got = Model::new();
    for item in db.iter_all() {
        let (k, v) = item.map_err(|e| format!("{when}: iterate: {e}"))?;
        got.insert(k.to_vec(), v.to_vec());
    }
    if got != *kv {
        return Err(format!(
            "{when}: the key-value store holds {} keys, {} acknowledged",
            got.len(),
            kv.len()
        ));
    }
    for (k, v) in kv.iter().step_by(37) {
        let g = db.get(k).map_err(|e| format!("{when}: get: {e}"))?;
        if g.as_deref() != Some(v.as_slice()) {
            return Err(format!("{when}: get {k:?} gave {g:?}"));
        }
    }
    let t = db.table("t").map_err(|e| format!("{when}: table: {e}"))?;
    let got = table_rows(&t)?;
    if got != *rows {
        return Err(format!("{when}: the table holds {} rows, {} acknowledged", got.len(), rows.len()));
    }
    Ok(())
}

/// The workload of a case whose options were accepted: writes, flush,
/// more writes, `compact_range`, reads, reopen, reads, more writes, reopen.
fn workload(db: &Db, fs: &MemFs, o: &Options, p: &Progress) -> Result<(), String> {
    let (mut kv, mut rows) = (Model::new(), BTreeMap::new());
    let t = db
        .create_table("t", table_schema(), &["k"], TableOptions::default())
        .map_err(|e| format!("create_table: {e}"))?;
    write_kv(db, o, 0..KV_KEYS / 2, &mut kv, p)?;
    write_table(db, &t, o, 0..TABLE_ROWS / 2, &mut rows, p)?;
    db.flush().map_err(|e| format!("flush: {e}"))?;
    p.step();
    write_kv(db, o, KV_KEYS / 2..KV_KEYS, &mut kv, p)?;
    write_table(db, &t, o, TABLE_ROWS / 2..TABLE_ROWS, &mut rows, p)?;
    db.compact_range::<&[u8]>(..).map_err(|e| format!("compact_range: {e}"))?;
    p.step();
    check_contents(db, &kv, &rows, "after compact_range")?;
    drop(t);
    db.close().map_err(|e| format!("close: {e}"))?;
    p.step();
    let db = Db::open(DB, o.clone()).map_err(|e| format!("reopen: {e}"))?;
    p.step();
    check_contents(&db, &kv, &rows, "after reopen")?;
    write_kv(&db, o, KV_KEYS..KV_KEYS + 100, &mut kv, p)?;
    db.close().map_err(|e| format!("close after reopen: {e}"))?;
    p.step();
    let db = Db::open(DB, o.clone().fs(Arc::new(fs.clone()))).map_err(|e| format!("second reopen: {e}"))?;
    p.step();
    check_contents(&db, &kv, &rows, "after the second reopen")?;
    db.close().map_err(|e| format!("final close: {e}"))
}

/// Steps of a case done so far, watched to tell a hang from a slow case.
#[derive(Clone, Default)]
struct Progress(Arc<AtomicU64>);

impl Progress {
    fn step(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn steps(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Opens with the case's options: a refusal must be `InvalidArgument`
/// naming a field the case changed; an acceptance must run the workload.
fn run_case(case: &Case, p: &Progress) -> Result<Verdict, String> {
    let fs = MemFs::new();
    let o = case.options(&fs);
    match Db::open(DB, o.clone()) {
        Err(Error::InvalidArgument(msg)) => {
            if case.changed.iter().any(|(name, _)| msg.contains(name)) {
                Ok(Verdict::Refused)
            } else {
                Err(format!("refused with a message that names none of the changed fields: {msg}"))
            }
        }
        Err(e) => Err(format!("Db::open failed with {e}; expected Ok or InvalidArgument")),
        Ok(db) => workload(&db, &fs, &o, p).map(|()| Verdict::Worked),
    }
}

/// Runs a case in its own thread: a hang is no progress for `LIMIT`, or
/// no end within `CASE_LIMIT`. `Err` describes the failure.
fn run_watched(case: &Case) -> Result<Verdict, String> {
    let (c, progress) = (case.clone(), Progress::default());
    let p = progress.clone();
    let pending = spawn_limited(move || run_case(&c, &p));
    let start = Instant::now();
    let mut last = (0, Instant::now());
    loop {
        match pending.try_wait_until(Instant::now() + Duration::from_millis(50)) {
            Some(Limited::Done(result)) => return result,
            Some(Limited::Panicked(m)) => return Err(format!("panicked: {m}")),
            Some(Limited::Hung) | None => {}
        }
        if progress.steps() != last.0 {
            last = (progress.steps(), Instant::now());
        }
        if last.1.elapsed() > LIMIT {
            return Err(format!("hung: no progress for {LIMIT:?} after {} steps", last.0));
        }
        if start.elapsed() > CASE_LIMIT {
            return Err(format!("hung: not done within {CASE_LIMIT:?} ({} steps)", last.0));
        }
    }
}

#[test]
fn random_option_sets_are_refused_or_work() {
    let (mut refused, mut worked, mut hangs) = (0, 0, 0);
    let mut failures = Vec::new();
    for seed in seeds(50) {
        let case = Case::random(&mut rng(seed));
        let start = Instant::now();
        let outcome = run_watched(&case);
        if start.elapsed() > LIMIT / 2 {
            eprintln!("seed {seed} took {:?}: {}", start.elapsed(), case.describe());
        }
        match outcome {
            Ok(Verdict::Refused) => refused += 1,
            Ok(Verdict::Worked) => worked += 1,
            Err(e) => {
                eprintln!(
                    "options failed with seed {seed}; replay with BASALT_SEED={seed}\n  {}\n  {e}",
                    case.describe()
                );
                hangs += usize::from(e.starts_with("hung"));
                failures.push(format!("BASALT_SEED={seed}: {}: {e}", case.describe()));
                if hangs >= HANGS_MAX {
                    eprintln!("{hangs} cases hung; the remaining seeds are skipped");
                    break;
                }
            }
        }
    }
    eprintln!("option sets: {refused} refused at open, {worked} worked, {} failed", failures.len());
    assert!(failures.is_empty(), "{} option sets failed:\n  {}", failures.len(), failures.join("\n  "));
}

fn assert_refused_or_works(changed: Vec<(&'static str, V)>) {
    let case = Case { changed };
    if let Err(e) = run_watched(&case) {
        panic!("{}: {e}", case.describe());
    }
}

/// Known hang: with `l0_files_stop` 0, every write waits for a compaction
/// that L0 does not need.
#[test]
fn l0_files_stop_0() {
    assert_refused_or_works(vec![("l0_files_stop", V::Usize(0))]);
}

/// Known hang: writes stop at one L0 file, and compaction only starts at
/// four.
#[test]
fn l0_files_stop_1_below_the_compaction_trigger() {
    assert_refused_or_works(vec![("l0_files_stop", V::Usize(1)), ("l0_compaction_trigger", V::Usize(4))]);
}

/// Writes stop at the default 20 L0 files, and compaction never starts.
#[test]
fn l0_compaction_trigger_above_the_stop() {
    assert_refused_or_works(vec![
        ("l0_compaction_trigger", V::Usize(usize::MAX)),
        ("memtable_bytes_max", V::Usize(4 * KIB)),
    ]);
}

/// The defaults and the small settings other tests use must work.
#[test]
fn defaults_and_small_settings_work() {
    for changed in [
        vec![],
        vec![("memtable_bytes_max", V::Usize(4 * KIB)), ("block_bytes_target", V::Usize(256))],
        vec![("write_buffer_bytes_max", V::Usize(16 * KIB)), ("l0_compaction_trigger", V::Usize(2))],
    ] {
        let case = Case { changed };
        assert_eq!(run_watched(&case), Ok(Verdict::Worked), "{}", case.describe());
    }
}

/// Each limit that must be positive is refused by its own name, so the
/// caller knows which field to fix.
#[test]
fn zero_size_limits_are_refused_by_name() {
    for field in ["key_bytes_max", "value_bytes_max", "batch_bytes_max"] {
        let case = Case { changed: vec![(field, V::Usize(0))] };
        assert_eq!(run_watched(&case), Ok(Verdict::Refused), "{}", case.describe());
    }
}

/// A delayed-write rate of one byte per second, with writes in the soft
/// zone from the first byte: each write would sleep its size in seconds.
#[test]
fn a_write_rate_of_one_byte_per_second() {
    assert_refused_or_works(vec![
        ("delayed_write_bytes_per_sec", V::U64(1)),
        ("write_buffer_soft_percent", V::U32(0)),
        ("write_buffer_bytes_max", V::Usize(16 * KIB)),
    ]);
}
