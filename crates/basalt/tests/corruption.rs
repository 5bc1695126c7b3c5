//! Damaged files, locking and bad input.
//!
//! - `corruption_sweep_*`: flips one byte at a time in every file of a small
//!   database (WAL, SSTs, MANIFEST, CURRENT), opens it and reads everything.
//!   Each result must be the expected data or `Error::Corruption` naming the
//!   damaged file: never a panic, a wrong value or a hang. The one exception
//!   is the final write to the newest WAL (its record and the seal after
//!   it), which a crash may tear: damage there may drop that record as a
//!   torn tail, and nothing else.
//! - `corruption_sweep_every_bit_of_meta_blocks_and_log_headers`: every
//!   single-bit flip of each SST's meta blocks and footer and of every log
//!   record header, which the byte sweep only samples.
//! - `truncation_sweep`: cuts each file short. A cut WAL is a torn tail (the
//!   records before the cut, exactly, and no error); a cut SST must be
//!   reported as `Corruption`; a cut MANIFEST or CURRENT must read correctly
//!   or report `Corruption` (see the test for why a cut MANIFEST is not a
//!   torn tail).
//! - `*_locked*`: one open handle per directory, in this process and across
//!   processes.
//! - The rest: bad input is refused and changes nothing.
//!
//! The sweeps print a table of outcomes to stderr. A failure prints the seed
//! that replays it (`BASALT_SEED=…`).

mod common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use basalt::fs::{Fs, RealFs};
use basalt::testing::{CrashMode, MemFs};
use basalt::{Compression, Db, DbIterator, Error, Options, WriteBatch, WriteOptions};
use common::guard::{Watchdog, panic_message, record_background_panics, take_background_panics};
use common::{Model, rng, run_seeded};
use rand::Rng;

const DB: &str = "/db";

fn db_path() -> &'static Path {
    Path::new(DB)
}

// ---------------------------------------------------------------------------
// The fixture: a small database with every kind of file.
// ---------------------------------------------------------------------------

struct Fixture {
    /// The closed database as a power loss would leave it: every file
    /// synced, so an independent copy of the synced state is the whole state.
    fs: MemFs,
    /// Options to open it with (the file system is replaced per trial).
    options: Options,
    /// What the database holds.
    expected: Model,
    /// Name of the WAL (the only one: every older one was flushed).
    wal: String,
    /// Start and end offsets of each WAL data record.
    wal_records: Vec<(usize, usize)>,
    /// `wal_models[j]`: the contents when only the first `j` WAL records
    /// survive.
    wal_models: Vec<Model>,
    /// Keys read back with `get`: present, deleted and never written.
    keys: Vec<Vec<u8>>,
}

fn value_for(i: usize, round: usize) -> Vec<u8> {
    // Repetitive, so LZ4 compresses the blocks.
    format!("value-{round}-{i:05}-").repeat(1 + i % 4).into_bytes()
}

/// Builds the database: 400 keys flushed to a large SST (several blocks),
/// overwrites and deletes flushed to a small one, then writes left in the
/// WAL, one record each; then a clean close.
/// With `blob_value_bytes_min` above 0, the flushed values at least that
/// long are in blob files (one per flush).
fn build_fixture(compression: Compression, blob_value_bytes_min: usize) -> Fixture {
    let fs = MemFs::new();
    let options = Options::default()
        .fs(Arc::new(fs.clone()))
        .memtable_bytes_max(1 << 20)
        .block_bytes_target(512)
        .bloom_bits_per_key(10)
        .compression(compression)
        .block_cache_bytes(1 << 20)
        .blob_value_bytes_min(blob_value_bytes_min)
        // The two SSTs stay as written, and opening a damaged copy starts
        // no background work.
        .auto_compaction(false);
    let db = Db::open(DB, options.clone()).expect("create");
    let mut model = Model::new();
    let key = |i: usize| format!("key{i:05}").into_bytes();
    for i in 0..400 {
        db.put(key(i), value_for(i, 0)).expect("put");
        model.insert(key(i), value_for(i, 0));
    }
    db.flush().expect("flush");
    for i in (0..400).step_by(13) {
        db.put(key(i), value_for(i, 1)).expect("overwrite");
        model.insert(key(i), value_for(i, 1));
    }
    for i in (5..400).step_by(29) {
        db.delete(key(i)).expect("delete");
        model.remove(&key(i));
    }
    db.flush().expect("flush");
    // The WAL: single puts, a delete of a flushed key, a batch.
    let mut wal_models = vec![model.clone()];
    for i in 0..8 {
        let k = key(1000 + i * 7);
        db.put_opt(&k, value_for(i, 2), &WriteOptions::default().sync(i % 3 == 0)).expect("put");
        model.insert(k, value_for(i, 2));
        wal_models.push(model.clone());
    }
    db.delete(key(26)).expect("delete");
    model.remove(&key(26));
    wal_models.push(model.clone());
    let mut batch = WriteBatch::new();
    for i in 0..6 {
        batch.put(key(2000 + i), value_for(i, 3));
        model.insert(key(2000 + i), value_for(i, 3));
    }
    batch.delete(key(39));
    model.remove(&key(39));
    db.write(batch).expect("batch");
    wal_models.push(model.clone());
    db.put(key(3000), b"last").expect("last put");
    model.insert(key(3000), b"last".to_vec());
    wal_models.push(model.clone());
    assert_eq!(common::contents(&db), model);
    db.close().expect("close");

    // The fixture is what survives a power loss now. Every file the
    // database uses must be fully synced: the same bytes as live. The
    // deletion of obsolete files is made durable too (as any later directory
    // sync would), so damage cannot be masked by a WAL that is still there.
    fs.sync_dir(db_path()).expect("sync_dir");
    let image = fs.crash(CrashMode::DropUnsynced, 0);
    let names = image.file_names(db_path());
    let live = fs.file_names(db_path());
    for n in &names {
        let p = db_path().join(n);
        if live.contains(n) {
            assert_eq!(image.read_file(&p), fs.read_file(&p), "{n} not synced");
        } else {
            panic!("{n} only exists after the crash");
        }
    }
    assert!(live.iter().all(|n| names.contains(n)), "directory entries not synced: {live:?} vs {names:?}");
    let wals: Vec<&String> = names.iter().filter(|n| has_extension(n, "wal")).collect();
    assert_eq!(wals.len(), 1, "one WAL: {names:?}");
    let wal = wals[0].clone();
    let wal_records = log_records(&image.read_file(&db_path().join(&wal)).expect("WAL"));
    assert_eq!(wal_records.len() + 1, wal_models.len(), "one WAL record per write");
    assert_eq!(names.iter().filter(|n| has_extension(n, "sst")).count(), 2, "two SSTs: {names:?}");
    let blobs = names.iter().filter(|n| has_extension(n, "blob")).count();
    assert_eq!(blobs, if blob_value_bytes_min > 0 { 2 } else { 0 }, "a blob file per flush: {names:?}");

    let mut keys: Vec<Vec<u8>> = (0..400).map(key).collect();
    keys.extend((0..8).map(|i| key(1000 + i * 7)));
    keys.extend((0..6).map(|i| key(2000 + i)));
    keys.extend([key(3000), key(99_999), b"".to_vec(), b"a".to_vec(), b"zzz".to_vec()]);
    Fixture { fs: image, options, expected: model, wal, wal_records, wal_models, keys }
}

fn has_extension(name: &str, extension: &str) -> bool {
    Path::new(name).extension().is_some_and(|e| e == extension)
}

/// Start and end offsets of the data records of an intact log file (12-byte
/// header: length u32 LE, two checksums; then the payload). Seal records
/// (payload `ff`, appended after every write) are left out.
fn log_records(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let len = u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        // Seals end every append: the MANIFEST's is one byte 0xff, the
        // WAL's 0xff and the commit time (9 bytes).
        let payload = &data[pos + 12..pos + 12 + len];
        if !(payload.first() == Some(&0xff) && (len == 1 || len == 9)) {
            out.push((pos, pos + 12 + len));
        }
        pos += 12 + len;
    }
    assert_eq!(pos, data.len(), "log ends on a record boundary");
    out
}

// ---------------------------------------------------------------------------
// One trial: damage a copy, open it, read everything, judge.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Xor the byte at `offset` with `mask` (nonzero).
    Flip { offset: usize, mask: u8 },
    /// Cut the file to `len` bytes.
    Truncate { len: usize },
}

/// What a damaged database may legitimately show.
struct Allowed {
    /// Contents it may hold (reads must agree with one of them).
    models: Vec<Model>,
    /// Whether `Error::Corruption` naming the file is acceptable.
    corruption_ok: bool,
    /// Whether the damage must be reported.
    must_detect: bool,
}

type Scan = (Vec<(Vec<u8>, Vec<u8>)>, Option<Error>);
type Get = (Vec<u8>, Result<Option<Vec<u8>>, Error>);

/// Everything read from a damaged database.
enum Observed {
    OpenFailed(Error),
    Opened { gets: Vec<Get>, forward: Scan, reverse: Scan },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    /// The expected contents, no error: the damage was harmless.
    Intact,
    /// `Corruption` naming the file, and every value read was right.
    Detected,
    /// Fewer WAL records than written, as after a torn write (allowed only
    /// for damage to the final write, or a cut WAL).
    TornTail,
}

/// Reads at most `limit` items, so a looping iterator cannot hang the test.
fn scan(it: DbIterator, limit: usize) -> Scan {
    let mut out = Vec::new();
    for item in it {
        match item {
            Ok((k, v)) => out.push((k.to_vec(), v.to_vec())),
            Err(e) => return (out, Some(e)),
        }
        if out.len() > limit {
            break;
        }
    }
    (out, None)
}

fn observe(fs: &MemFs, options: &Options, keys: &[Vec<u8>], limit: usize) -> Observed {
    let db = match Db::open(DB, options.clone().fs(Arc::new(fs.clone()))) {
        Ok(db) => db,
        Err(e) => return Observed::OpenFailed(e),
    };
    let gets = keys.iter().map(|k| (k.clone(), db.get(k).map(|v| v.map(|v| v.to_vec())))).collect();
    let forward = scan(db.iter_all(), limit);
    let reverse = scan(db.iter_rev::<&[u8]>(..), limit);
    Observed::Opened { gets, forward, reverse }
}

/// Checks that `e` is `Corruption` naming `file`.
fn check_error(e: &Error, file: &str, what: &str) -> Result<(), String> {
    match e {
        Error::Corruption { file: f, .. } if f.file_name().is_some_and(|n| n == file) => Ok(()),
        Error::Corruption { .. } => Err(format!("{what}: Corruption names the wrong file: {e}")),
        _ => Err(format!("{what}: expected Corruption, got {e}")),
    }
}

/// Whether every read agrees with `model` (errors aside); a description of
/// the first disagreement otherwise.
fn agrees(observed: &Observed, model: &Model) -> Result<(), String> {
    let Observed::Opened { gets, forward, reverse } = observed else { return Ok(()) };
    for (k, got) in gets {
        if let Ok(v) = got
            && v.as_ref() != model.get(k)
        {
            let want = model.get(k).map(Vec::len);
            return Err(format!(
                "get {k:?}: wrong value (length {:?}, want {want:?})",
                v.as_ref().map(Vec::len)
            ));
        }
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let want_rev: Vec<(Vec<u8>, Vec<u8>)> = want.iter().rev().cloned().collect();
    for (name, (items, err), want) in [("forward", forward, &want), ("reverse", reverse, &want_rev)] {
        let complete = err.is_none();
        let ok = if complete { items == want } else { want.starts_with(items) };
        if !ok {
            let at = items
                .iter()
                .zip(want.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(items.len().min(want.len()));
            return Err(format!(
                "{name} scan: wrong items from position {at} ({} read, {} expected, complete={complete}): got {:?}, want {:?}",
                items.len(),
                want.len(),
                items.get(at).map(|kv| &kv.0),
                want.get(at).map(|kv| &kv.0)
            ));
        }
    }
    Ok(())
}

fn judge(observed: &Observed, allowed: &Allowed, expected: &Model, file: &str) -> Result<Verdict, String> {
    let errors: Vec<(&str, &Error)> = match observed {
        Observed::OpenFailed(e) => vec![("open", e)],
        Observed::Opened { gets, forward, reverse } => gets
            .iter()
            .filter_map(|(_, r)| r.as_ref().err().map(|e| ("get", e)))
            .chain(forward.1.iter().map(|e| ("forward scan", e)))
            .chain(reverse.1.iter().map(|e| ("reverse scan", e)))
            .collect(),
    };
    for (what, e) in &errors {
        if !allowed.corruption_ok {
            return Err(format!("{what}: no error allowed here, got {e}"));
        }
        check_error(e, file, what)?;
    }
    let mut first_disagreement = None;
    for model in &allowed.models {
        match agrees(observed, model) {
            Ok(()) if !errors.is_empty() => return Ok(Verdict::Detected),
            Ok(()) if allowed.must_detect => return Err("damage not detected".into()),
            Ok(()) => return Ok(if model == expected { Verdict::Intact } else { Verdict::TornTail }),
            Err(e) => {
                first_disagreement.get_or_insert(e);
            }
        }
    }
    Err(first_disagreement.unwrap_or_else(|| "no allowed contents".into()))
}

fn trial(fixture: &Fixture, file: &str, damage: Damage, allowed: &Allowed) -> Result<Verdict, String> {
    let fs = fixture.fs.crash(CrashMode::DropUnsynced, 0);
    let path = db_path().join(file);
    let mut bytes = fs.read_file(&path).expect("file exists");
    match damage {
        Damage::Flip { offset, mask } => bytes[offset] ^= mask,
        Damage::Truncate { len } => bytes.truncate(len),
    }
    fs.write_file_synced(&path, &bytes).expect("write damaged file");
    let limit = fixture.expected.len() + 10;
    let observed =
        std::panic::catch_unwind(AssertUnwindSafe(|| observe(&fs, &fixture.options, &fixture.keys, limit)))
            .map_err(|p| format!("panic: {}", panic_message(p.as_ref())))?;
    let background = take_background_panics();
    if !background.is_empty() {
        return Err(format!("panic in a background thread: {background:?}"));
    }
    judge(&observed, allowed, &fixture.expected, file)
}

#[derive(Default)]
struct Counts {
    trials: usize,
    by_verdict: BTreeMap<Verdict, usize>,
    violations: usize,
    /// Offsets (flips) or lengths (cuts) with a violation.
    violating: std::collections::BTreeSet<usize>,
}

/// `[1, 2, 3, 7]` as `1..=3 7`.
fn ranges(set: &std::collections::BTreeSet<usize>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end = iter.next().unwrap_or(end);
        }
        out.push(if start == end { start.to_string() } else { format!("{start}..={end}") });
    }
    out.join(" ")
}

/// Outcomes of a sweep, per file.
#[derive(Default)]
struct Tally {
    files: BTreeMap<String, Counts>,
    violations: Vec<String>,
}

impl Tally {
    fn record(&mut self, file: &str, damage: Damage, outcome: Result<Verdict, String>) {
        let counts = self.files.entry(file.to_string()).or_default();
        counts.trials += 1;
        match outcome {
            Ok(v) => *counts.by_verdict.entry(v).or_default() += 1,
            Err(e) => {
                counts.violations += 1;
                counts.violating.insert(match damage {
                    Damage::Flip { offset, .. } => offset,
                    Damage::Truncate { len } => len,
                });
                self.violations.push(format!("{file} {damage:?}: {e}"));
            }
        }
    }

    /// Prints the table (past the test harness's capture, so a normal run
    /// shows it) and fails on any violation.
    fn finish(self, title: &str) {
        use std::fmt::Write as _;
        let mut out = format!("\n{title}\n");
        for (file, c) in &self.files {
            let n = |v| c.by_verdict.get(&v).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "  {file:<16} {:>5} trials: {:>5} detected as corruption, {:>4} harmless, \
                 {:>4} dropped as torn tail, {:>4} VIOLATIONS",
                c.trials,
                n(Verdict::Detected),
                n(Verdict::Intact),
                n(Verdict::TornTail),
                c.violations
            );
            if !c.violating.is_empty() {
                let _ = writeln!(out, "  {:<16} violations at {}", "", ranges(&c.violating));
            }
        }
        let _ = std::io::stderr().write_all(out.as_bytes());
        if !self.violations.is_empty() {
            // A sample from each file, so one bug does not hide another.
            let mut shown: BTreeMap<&str, usize> = BTreeMap::new();
            for v in &self.violations {
                let file = v.split(' ').next().unwrap_or("");
                let seen = shown.entry(file).or_default();
                *seen += 1;
                if *seen <= 5 {
                    eprintln!("violation: {v}");
                }
            }
            panic!("{title}: {} violations (a sample is printed above)", self.violations.len());
        }
    }
}

/// Offsets to damage: all of a small file, else a sample plus both ends.
fn offsets(len: usize, rng: &mut impl Rng) -> Vec<usize> {
    if len <= 8 << 10 {
        return (0..len).collect();
    }
    let mut set: std::collections::BTreeSet<usize> = (0..64).chain(len - 64..len).collect();
    while set.len() < 2_000 + 128 {
        set.insert(rng.random_range(0..len));
    }
    set.into_iter().collect()
}

fn damaged_files(fixture: &Fixture) -> Vec<String> {
    // LOCK is empty and never read.
    fixture.fs.file_names(db_path()).into_iter().filter(|n| n != "LOCK").collect()
}

/// What a flip at `offset` of `file` may legitimately lead to.
fn flip_allowed(fixture: &Fixture, file: &str, offset: usize) -> Allowed {
    let (last_start, _) = *fixture.wal_records.last().expect("WAL records");
    if file == fixture.wal && offset >= last_start {
        // The final write to the newest WAL (its record, and the seal after
        // it): damage there may be taken for a write torn by a crash, which
        // drops the record or (for a damaged seal) keeps it.
        let without_last = fixture.wal_models[fixture.wal_models.len() - 2].clone();
        let models = vec![without_last, fixture.expected.clone()];
        Allowed { models, corruption_ok: true, must_detect: false }
    } else {
        Allowed { models: vec![fixture.expected.clone()], corruption_ok: true, must_detect: false }
    }
}

fn corruption_sweep(compression: Compression, blob_value_bytes_min: usize, seed: u64) {
    record_background_panics();
    let mut rng = rng(seed);
    let fixture = build_fixture(compression, blob_value_bytes_min);
    let watchdog = Watchdog::new(Duration::from_secs(30));
    let mut tally = Tally::default();
    for file in damaged_files(&fixture) {
        let len = fixture.fs.file_len(&db_path().join(&file)).expect("file") as usize;
        // Small files get every single-bit flip too (a digit of CURRENT
        // may turn into another digit).
        let single_bits: &[u8] = if len <= 256 { &[1, 2, 4, 8, 16, 32, 64, 128] } else { &[] };
        let flips = offsets(len, &mut rng).into_iter().flat_map(|offset| {
            let random = rng.random_range(1..=255u8);
            std::iter::once(random)
                .chain(single_bits.iter().copied().filter(move |&m| m != random))
                .map(move |mask| (offset, mask))
        });
        for (offset, mask) in flips.collect::<Vec<_>>() {
            let damage = Damage::Flip { offset, mask };
            let allowed = flip_allowed(&fixture, &file, offset);
            watchdog.start(format!("seed {seed}: {file} {damage:?}"));
            tally.record(&file, damage, trial(&fixture, &file, damage, &allowed));
        }
    }
    drop(watchdog);
    tally.finish(&format!(
        "corruption sweep ({compression:?}, blob values from {blob_value_bytes_min} bytes, seed {seed}): \
         one byte flipped per trial"
    ));
}

/// Where the meta blocks of an intact SST start: the smallest block offset
/// its metaindex lists (footer: metaindex offset u64, size u32 at the start
/// of the last 40 bytes; metaindex: count u32, then kind u8, offset u64,
/// size u32 per entry).
fn sst_meta_start(data: &[u8]) -> usize {
    let footer = &data[data.len() - 40..];
    let metaindex = u64::from_le_bytes(footer[..8].try_into().expect("8 bytes")) as usize;
    let count = u32::from_le_bytes(data[metaindex..metaindex + 4].try_into().expect("4 bytes")) as usize;
    (0..count)
        .map(|i| {
            let at = metaindex + 4 + 13 * i + 1;
            u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes")) as usize
        })
        .min()
        .unwrap_or(metaindex)
}

/// Start offsets of every record of an intact log file, seals included.
fn log_record_starts(data: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        out.push(pos);
        pos += 12 + u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4 bytes")) as usize;
    }
    out
}

/// Bits flipped per file by default; `BASALT_BIT_SWEEP=all` flips all.
const BIT_FLIPS_MAX: usize = 6_000;

/// Every bit of `offsets` when they hold at most `BIT_FLIPS_MAX`; else
/// every bit of the last 512 bytes (footer, metaindex, properties) and a
/// seeded sample of the rest.
fn bits_to_flip(offsets: &[usize], rng: &mut impl Rng) -> Vec<(usize, u8)> {
    let all: Vec<(usize, u8)> = offsets.iter().flat_map(|&o| (0..8).map(move |b| (o, b))).collect();
    if all.len() <= BIT_FLIPS_MAX || std::env::var("BASALT_BIT_SWEEP").is_ok_and(|v| v == "all") {
        return all;
    }
    let tail = all.len() - 512 * 8;
    let mut picked: std::collections::BTreeSet<usize> = (tail..all.len()).collect();
    while picked.len() < BIT_FLIPS_MAX {
        picked.insert(rng.random_range(0..tail));
    }
    picked.into_iter().map(|i| all[i]).collect()
}

/// The byte-flip sweep samples large files and flips one random mask per
/// byte. This one flips every single bit of the structures that locate and
/// check everything else: each SST's meta blocks (filter, index,
/// properties, metaindex and their trailers) and footer, and the 12-byte
/// header of every record of the WAL and the MANIFEST. By default a file
/// with more than `BIT_FLIPS_MAX` such bits gets its last 512 bytes whole
/// and a sample of the rest; `BASALT_BIT_SWEEP=all` flips every bit.
#[test]
fn corruption_sweep_every_bit_of_meta_blocks_and_log_headers() {
    record_background_panics();
    let fixture = build_fixture(Compression::Lz4, 0);
    let mut rng = rng(0x5eed);
    let watchdog = Watchdog::new(Duration::from_secs(30));
    let mut tally = Tally::default();
    for file in damaged_files(&fixture) {
        let data = fixture.fs.read_file(&db_path().join(&file)).expect("file");
        let offsets: Vec<usize> = if has_extension(&file, "sst") {
            (sst_meta_start(&data)..data.len()).collect()
        } else if file == fixture.wal || file.starts_with("MANIFEST") {
            log_record_starts(&data).into_iter().flat_map(|start| start..start + 12).collect()
        } else {
            continue;
        };
        for (offset, bit) in bits_to_flip(&offsets, &mut rng) {
            let damage = Damage::Flip { offset, mask: 1 << bit };
            let allowed = flip_allowed(&fixture, &file, offset);
            watchdog.start(format!("{file} {damage:?}"));
            tally.record(&file, damage, trial(&fixture, &file, damage, &allowed));
        }
    }
    drop(watchdog);
    tally.finish("bit sweep: single bits of SST meta blocks and footers, and of log record headers");
}

#[test]
fn corruption_sweep_uncompressed() {
    run_seeded("corruption_sweep_uncompressed", 1, |seed| corruption_sweep(Compression::None, 0, seed));
}

#[test]
fn corruption_sweep_lz4() {
    run_seeded("corruption_sweep_lz4", 1, |seed| corruption_sweep(Compression::Lz4, 0, seed));
}

/// The sweep over a database whose longer values are in blob files: any
/// error must be `Corruption` naming the damaged file, and every value
/// read must be right (a flip in a value record is detected by the reads
/// of that value; a flip in the footer or in a shadowed value is
/// harmless to reads, and `inspect::verify_blob_files` finds it).
#[test]
fn corruption_sweep_with_blob_files() {
    run_seeded("corruption_sweep_with_blob_files", 1, |seed| corruption_sweep(Compression::None, 30, seed));
}

/// Cuts each file at a sample of lengths (every length of small files).
///
/// - WAL: a cut is a torn tail; the database holds exactly the records
///   before the cut, with no error.
/// - SST: the cut must be reported as `Corruption` naming the SST.
/// - MANIFEST and CURRENT: expected contents or `Corruption`. A cut MANIFEST
///   looks like a crash that tore its last edits, but a crash can only tear
///   an edit whose fsync never returned, and the engine deletes the WALs an
///   edit retires only after that fsync. Here those edits were synced and
///   the WALs they retired are gone, so the engine can tell (the WAL the
///   surviving edits name is missing) and must not silently drop them: that
///   loses the flushed data, and the open then deletes its SSTs as orphans.
#[test]
fn truncation_sweep() {
    run_seeded("truncation_sweep", 1, |seed| truncation_sweep_of(0, seed));
}

/// The truncation sweep with values in blob files: a cut blob file is
/// reported at open (its size is in the MANIFEST).
#[test]
fn truncation_sweep_with_blob_files() {
    run_seeded("truncation_sweep_with_blob_files", 1, |seed| truncation_sweep_of(30, seed));
}

fn truncation_sweep_of(blob_value_bytes_min: usize, seed: u64) {
    {
        record_background_panics();
        let mut rng = rng(seed);
        let fixture = build_fixture(Compression::None, blob_value_bytes_min);
        let watchdog = Watchdog::new(Duration::from_secs(30));
        let mut tally = Tally::default();
        for file in damaged_files(&fixture) {
            let len = fixture.fs.file_len(&db_path().join(&file)).expect("file") as usize;
            let lengths: Vec<usize> = if len <= 4 << 10 {
                (0..len).collect()
            } else {
                let mut set: std::collections::BTreeSet<usize> = (0..16).chain(len - 64..len).collect();
                while set.len() < 400 {
                    set.insert(rng.random_range(0..len));
                }
                set.into_iter().collect()
            };
            for cut in lengths {
                let allowed = if file == fixture.wal {
                    // Every data record wholly before the cut survives (a cut
                    // seal loses nothing).
                    let kept = fixture.wal_records.iter().filter(|(_, end)| *end <= cut).count();
                    Allowed {
                        models: vec![fixture.wal_models[kept].clone()],
                        corruption_ok: false,
                        must_detect: false,
                    }
                } else {
                    Allowed {
                        models: vec![fixture.expected.clone()],
                        corruption_ok: true,
                        must_detect: has_extension(&file, "sst") || has_extension(&file, "blob"),
                    }
                };
                let damage = Damage::Truncate { len: cut };
                watchdog.start(format!("seed {seed}: {file} {damage:?}"));
                tally.record(&file, damage, trial(&fixture, &file, damage, &allowed));
            }
        }
        drop(watchdog);
        tally.finish(&format!(
            "truncation sweep (blob values from {blob_value_bytes_min} bytes, seed {seed}): one file cut short per trial"
        ));
    }
}

// ---------------------------------------------------------------------------
// Locking.
// ---------------------------------------------------------------------------

fn mem_options(fs: &MemFs) -> Options {
    Options::default().fs(Arc::new(fs.clone()))
}

fn assert_locked(result: Result<Db, Error>, dir: &Path) {
    match result {
        Err(Error::Locked(p)) => assert_eq!(p, dir),
        Err(e) => panic!("expected Error::Locked, got {e}"),
        Ok(_) => panic!("a second handle opened a locked database"),
    }
}

#[test]
fn second_open_in_process_is_locked() {
    let fs = MemFs::new();
    let db = Db::open(DB, mem_options(&fs)).expect("open");
    db.put(b"k", b"v").expect("put");
    assert_locked(Db::open(DB, mem_options(&fs)), db_path());
    // The refused open disturbed nothing.
    db.put(b"k2", b"v2").expect("put after a refused open");
    drop(db);
    let db = Db::open(DB, mem_options(&fs)).expect("open after the first handle was dropped");
    assert_eq!(db.get(b"k2").expect("get").as_deref(), Some(&b"v2"[..]));
    // Closing (or dropping) the database releases the directory even while
    // snapshots and iterators are alive; they get `Error::Closed` from then
    // on instead of reading a database another handle may now write.
    let snapshot = db.snapshot();
    let mut iter = db.iter_all();
    db.close().expect("close");
    assert!(matches!(snapshot.get(b"k"), Err(Error::Closed(_))));
    assert!(matches!(iter.next(), Some(Err(Error::Closed(_)))));
    let db = Db::open(DB, mem_options(&fs)).expect("open while the old handles are alive");
    assert_locked(Db::open(DB, mem_options(&fs)), db_path());
    assert!(matches!(snapshot.get(b"k"), Err(Error::Closed(_))), "an old handle reads the new database");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    drop((snapshot, iter));
    let mut iter = db.iter_all();
    drop(db);
    assert!(matches!(iter.next(), Some(Err(Error::Closed(_)))));
    Db::open(DB, mem_options(&fs)).expect("open after a drop").close().expect("close");

    // The same on the real file system.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default()).expect("open");
    assert_locked(Db::open(&path, Options::default()), &path);
    db.close().expect("close");
    Db::open(&path, Options::default()).expect("open after close").close().expect("close");
}

const CHILD_DIR_ENV: &str = "BASALT_LOCK_CHILD_DIR";
const CHILD_EXPECT_ENV: &str = "BASALT_LOCK_CHILD_EXPECT";

/// Runs this test binary again as a child that opens `dir`; true when the
/// child saw `expect` ("locked" or "opened").
fn child_sees(dir: &Path, expect: &str) -> bool {
    let status = std::process::Command::new(std::env::current_exe().expect("current exe"))
        .args(["--exact", "second_process_is_locked_out", "--nocapture"])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_EXPECT_ENV, expect)
        .status()
        .expect("run child");
    status.code() == Some(0)
}

#[test]
fn second_process_is_locked_out() {
    if let Ok(dir) = std::env::var(CHILD_DIR_ENV) {
        // The child: open, report, exit.
        let expect = std::env::var(CHILD_EXPECT_ENV).unwrap_or_default();
        let result = Db::open(&dir, Options::default().create_if_missing(false));
        let seen = match &result {
            Err(Error::Locked(_)) => "locked".to_string(),
            Ok(db) if db.get(b"parent").ok().flatten().as_deref() == Some(&b"wrote this"[..]) => {
                "opened".to_string()
            }
            Ok(_) => "opened without the parent's data".to_string(),
            Err(e) => format!("error: {e}"),
        };
        eprintln!("child: expected {expect}, saw {seen}");
        std::process::exit(i32::from(seen != expect));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default()).expect("open");
    db.put_opt(b"parent", b"wrote this", &WriteOptions::default().sync(true)).expect("put");
    assert!(child_sees(&path, "locked"), "a second process opened a locked database");
    db.put(b"still", b"writable").expect("the parent keeps writing");
    drop(db);
    assert!(child_sees(&path, "opened"), "a second process could not open a released database");
    let db = Db::open(&path, Options::default()).expect("reopen");
    assert_eq!(db.get(b"still").expect("get").as_deref(), Some(&b"writable"[..]));
}

// ---------------------------------------------------------------------------
// Bad input changes nothing.
// ---------------------------------------------------------------------------

/// Every file under `dir` (names and bytes), through the `Fs` trait.
fn tree(fs: &dyn Fs, dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let Ok(names) = fs.list(dir) else { return out };
    for name in names {
        let path = dir.join(&name);
        if fs.is_dir(&path).expect("is_dir") {
            for (sub, bytes) in tree(fs, &path) {
                out.insert(format!("{name}/{sub}"), bytes);
            }
            out.insert(format!("{name}/"), None);
        } else {
            out.insert(name, Some(fs.read_all(&path).expect("read")));
        }
    }
    out
}

fn assert_invalid(result: Result<(), Error>, what: &str) {
    match result {
        Err(Error::InvalidArgument(_)) => {}
        Err(e) => panic!("{what}: expected InvalidArgument, got {e}"),
        Ok(()) => panic!("{what}: accepted"),
    }
}

#[test]
fn oversized_keys_and_values_change_nothing() {
    let fs = MemFs::new();
    let options = mem_options(&fs).key_bytes_max(16).value_bytes_max(64);
    let db = Db::open(DB, options.clone()).expect("open");
    db.put(b"existing", b"value").expect("put");
    db.sync_wal().expect("sync");
    let before = tree(&fs, db_path());
    let (key_ok, key_big) = (vec![b'k'; 16], vec![b'k'; 17]);
    let (value_ok, value_big) = (vec![b'v'; 64], vec![b'v'; 65]);
    for sync in [false, true] {
        let opts = WriteOptions::default().sync(sync);
        assert_invalid(db.put_opt(&key_big, b"v", &opts), "oversized key");
        assert_invalid(db.put_opt(b"small", &value_big, &opts), "oversized value");
        assert_invalid(db.delete_opt(&key_big, &opts), "delete of an oversized key");
        for bad_at in 0..3 {
            let mut batch = WriteBatch::new();
            for i in 0..3 {
                if i == bad_at {
                    if sync { batch.put(&key_ok, &value_big) } else { batch.put(&key_big, b"v") }
                } else {
                    batch.put(format!("batch{i}"), b"v");
                }
            }
            batch.delete(b"existing");
            assert_invalid(db.write_opt(batch, &opts), "batch with one oversized entry");
        }
    }
    assert_eq!(tree(&fs, db_path()), before, "a refused write changed the files");
    let want: Model = [(b"existing".to_vec(), b"value".to_vec())].into_iter().collect();
    assert_eq!(common::contents(&db), want, "a refused write changed the contents");
    // The limits themselves are accepted, and the database still writes.
    db.put(&key_ok, &value_ok).expect("key and value at the limits");
    db.close().expect("close");
    let db = Db::open(DB, options).expect("reopen");
    let mut want = want;
    want.insert(key_ok, value_ok);
    assert_eq!(common::contents(&db), want);
}

/// Opening `path` with `options` fails and leaves everything under `root`
/// as it was.
fn assert_refused_untouched(fs: &dyn Fs, root: &Path, path: &Path, options: Options, what: &str) {
    let before = tree(fs, root);
    let result = Db::open(path, options);
    assert!(result.is_err(), "{what}: opened");
    drop(result);
    assert_eq!(tree(fs, root), before, "{what}: files changed");
}

#[test]
fn opening_a_regular_file_changes_nothing() {
    let fs = MemFs::new();
    fs.write_file_synced(Path::new("/data/file"), b"precious bytes").expect("write");
    assert_refused_untouched(
        &fs,
        Path::new("/data"),
        Path::new("/data/file"),
        mem_options(&fs),
        "MemFs file",
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("file");
    std::fs::write(&file, b"precious bytes").expect("write");
    assert_refused_untouched(&RealFs, dir.path(), &file, Options::default(), "real file");
}

#[test]
fn opening_a_foreign_directory_changes_nothing() {
    // Each a non-empty directory that holds no Basalt database.
    let cases: [&[(&str, &[u8])]; 5] = [
        &[("notes.txt", b"my notes")],
        &[("notes.txt", b"my notes"), ("sub/inner.bin", b"\x00\x01")],
        &[("000007.sst", b"not an sst")],
        &[("000003.wal", b"not a wal"), ("LOCK", b"")],
        &[("scratch.tmp", b"a user's temporary file")],
    ];
    for (i, files) in cases.iter().enumerate() {
        let fs = MemFs::new();
        let root = Path::new("/data");
        for (name, bytes) in *files {
            fs.write_file_synced(&root.join(name), bytes).expect("write");
        }
        let what = format!("MemFs directory holding {:?}", files.iter().map(|f| f.0).collect::<Vec<_>>());
        assert_refused_untouched(&fs, root, root, mem_options(&fs), &what);

        let dir = tempfile::tempdir().expect("tempdir");
        for (name, bytes) in *files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, bytes).expect("write");
        }
        let what = format!("real directory {i}");
        assert_refused_untouched(&RealFs, dir.path(), dir.path(), Options::default(), &what);
    }
}

#[test]
fn missing_path_without_create_if_missing_creates_nothing() {
    let fs = MemFs::new();
    let options = mem_options(&fs).create_if_missing(false);
    assert!(Db::open("/data/db", options).is_err(), "opened a missing database");
    assert!(!fs.exists(Path::new("/data")).expect("exists"), "created the parent");
    assert!(tree(&fs, Path::new("/")).is_empty(), "created files");

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("missing/db");
    let options = Options::default().create_if_missing(false);
    assert!(Db::open(&path, options).is_err(), "opened a missing database");
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0, "created something");
}

#[test]
fn error_if_exists_changes_nothing() {
    let fs = MemFs::new();
    let db = Db::open(DB, mem_options(&fs)).expect("create");
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    let options = mem_options(&fs).error_if_exists(true);
    assert_refused_untouched(&fs, db_path(), db_path(), options, "error_if_exists");
    let db = Db::open(DB, mem_options(&fs)).expect("reopen");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
}
