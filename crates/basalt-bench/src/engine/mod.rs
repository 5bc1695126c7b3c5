//! The engines under test behind one trait. Every adapter gets the same
//! rows, the same durability (each batch is one atomic write handed to the
//! OS without an fsync; `settle` makes everything durable), the same cache
//! budget where the engine has one, and is tuned as its own documentation
//! advises (docs/BENCHMARKS-history.md lists every setting).

mod basalt;
mod fjall;
#[cfg(feature = "leveldb")]
mod leveldb;
mod lmdb;
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
mod sqlite;

pub use sqlite::MMAP_BYTES as SQLITE_MMAP_BYTES;
pub use sqlite::connect_wal as sqlite_connect_wal;

use std::path::Path;

/// Errors of the harness and of every engine, boxed.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
/// Result of the harness.
pub type Result<T> = std::result::Result<T, Error>;

/// One row: key and value.
pub type Row = (Vec<u8>, Vec<u8>);

/// A transaction's update of its `i`-th key, given the value it read.
pub type Update<'a> = dyn FnMut(usize, Option<&[u8]>) -> Vec<u8> + 'a;

/// What the harness asks of every engine.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Block or page cache budget, in bytes, for engines that have one.
    pub cache_bytes: usize,
    /// Write-buffer (memtable) memory budget, for engines that have one.
    pub write_buffer_budget_bytes: Option<usize>,
    /// Keys are 8-byte big-endian integers (SQLite then uses an `INTEGER
    /// PRIMARY KEY` table, as its documentation advises for integer keys).
    pub int_keys: bool,
    /// The values' size, where the workload knows it (SQLite's docs advise
    /// a `WITHOUT ROWID` table only for rows under 1/20 of a page).
    pub value_bytes: usize,
}

/// An open engine. `Send + Sync`: YCSB shares it between threads.
pub trait Engine: Send + Sync {
    /// Writes `rows` as one atomic batch (one transaction), without fsync.
    fn write(&self, rows: &[Row]) -> Result<()>;

    /// A reader: a read transaction, a connection, or a plain handle. Each
    /// thread takes its own.
    fn reader(&self) -> Result<Box<dyn Reader + '_>>;

    /// Makes every write durable and waits for background work (memtable
    /// flushes, compactions), so reads run against a settled store.
    fn settle(&self) -> Result<()>;

    /// One read-modify-write transaction: reads every key of `keys` (each
    /// at most once), then writes `update(i, value read)` to key `i`,
    /// atomically against every other writer, with the engine's own
    /// transactions. `Ok(true)`: committed; `Ok(false)`: an optimistic
    /// engine refused the commit for a conflict and wrote nothing (the
    /// caller runs it again).
    fn transact(&self, _keys: &[&[u8]], _update: &mut Update<'_>) -> Result<bool> {
        Err("this engine has no transactions in the harness".into())
    }

    /// Whether `Config::write_buffer_budget_bytes` is honoured.
    fn has_write_buffer_budget(&self) -> bool {
        false
    }

    /// Basalt opened by [`open_timed`]: the mean time of its point lookups
    /// so far by phase (`Options::timing_stats`). `None` for every other
    /// engine, and for Basalt opened without timing.
    fn get_latency(&self) -> Option<::basalt::GetLatency> {
        None
    }

    /// Memory the engine reports holding itself (Basalt's
    /// `Stats::engine_memory_bytes`: memtables, caches, SST metadata);
    /// `None` for engines that report none.
    fn engine_memory_bytes(&self) -> Option<u64> {
        None
    }

    /// Where writes spent their time so far, for engines that count it:
    /// (metric, value, unit) triples such as time writers stalled or were
    /// delayed, and the flushes and compactions run meanwhile.
    fn write_breakdown(&self) -> Vec<(&'static str, f64, &'static str)> {
        Vec::new()
    }
}

/// Reads of one thread.
pub trait Reader {
    /// Looks `key` up and hands the value to `check` (borrowed or copied,
    /// as the engine returns it). Returns whether the key was found.
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool>;

    /// Visits up to `limit` rows with keys in `[start, end)` (`end` `None`:
    /// unbounded) in ascending order. Returns the number visited.
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize>;
}

/// The engines this build knows, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Basalt, this project.
    Basalt,
    /// Basalt with the learned index off: SSTs carry no model and lookups
    /// binary-search the fence keys (the model's on/off comparison).
    #[serde(rename = "basalt-fences")]
    BasaltFences,
    /// Basalt looking values up with `Db::get_with` (borrowed, no copy)
    /// instead of `Db::get`.
    #[serde(rename = "basalt-get-with")]
    BasaltGetWith,
    /// Basalt with memory-mapped reads off: SST blocks are read with
    /// `pread` into the block cache (the equal-memory comparison where a
    /// memory cgroup is not available).
    #[serde(rename = "basalt-nomaps")]
    BasaltNoMaps,
    /// Basalt with keyspace values of 2 KiB and more in blob files.
    #[serde(rename = "basalt-blobs")]
    BasaltBlobs,
    /// SQLite through rusqlite (bundled).
    Sqlite,
    /// LMDB through heed.
    Lmdb,
    /// redb.
    Redb,
    /// fjall.
    Fjall,
    /// RocksDB through rust-rocksdb (feature `rocksdb`).
    Rocksdb,
    /// LevelDB through the `leveldb` crate (feature `leveldb`).
    Leveldb,
}

impl Kind {
    /// Every engine, built or not.
    pub const ALL: [Kind; 11] = [
        Kind::Basalt,
        Kind::BasaltFences,
        Kind::BasaltGetWith,
        Kind::BasaltNoMaps,
        Kind::BasaltBlobs,
        Kind::Sqlite,
        Kind::Lmdb,
        Kind::Redb,
        Kind::Fjall,
        Kind::Rocksdb,
        Kind::Leveldb,
    ];

    /// The name on the command line and in result files.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Basalt => "basalt",
            Kind::BasaltFences => "basalt-fences",
            Kind::BasaltGetWith => "basalt-get-with",
            Kind::BasaltNoMaps => "basalt-nomaps",
            Kind::BasaltBlobs => "basalt-blobs",
            Kind::Sqlite => "sqlite",
            Kind::Lmdb => "lmdb",
            Kind::Redb => "redb",
            Kind::Fjall => "fjall",
            Kind::Rocksdb => "rocksdb",
            Kind::Leveldb => "leveldb",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether this build includes the engine (RocksDB and LevelDB are cargo
    /// features).
    pub fn is_built(self) -> bool {
        !matches!(self, Kind::Rocksdb if !cfg!(feature = "rocksdb"))
            && !matches!(self, Kind::Leveldb if !cfg!(feature = "leveldb"))
    }

    /// The engines built into this binary.
    pub fn built() -> Vec<Kind> {
        Kind::ALL.into_iter().filter(|k| k.is_built()).collect()
    }

    /// The engines a run takes when none are named: every built one but
    /// the variants that differ from `basalt` by one read-path setting
    /// (`basalt-get-with`, `basalt-nomaps`), which run when asked for.
    /// `basalt-fences` stays: the learned index is measured in every run.
    pub fn defaults() -> Vec<Kind> {
        Kind::built()
            .into_iter()
            .filter(|k| !matches!(k, Kind::BasaltGetWith | Kind::BasaltNoMaps | Kind::BasaltBlobs))
            .collect()
    }

    /// Whether a Basalt build (the engine or one of its variants).
    pub fn is_basalt(self) -> bool {
        matches!(
            self,
            Kind::Basalt | Kind::BasaltFences | Kind::BasaltGetWith | Kind::BasaltNoMaps | Kind::BasaltBlobs
        )
    }

    /// Whether the engine's reads run inside a read transaction (a
    /// snapshot the reader holds until it is dropped): LMDB, redb and
    /// SQLite, whose APIs read only within one. The others (Basalt,
    /// fjall, RocksDB, LevelDB) read the latest committed data with each
    /// lookup, without a transaction; the harness renews every reader at
    /// the same points for all.
    pub fn reads_in_transactions(self) -> bool {
        matches!(self, Kind::Sqlite | Kind::Lmdb | Kind::Redb)
    }

    /// The engine's version (of the library the crate wraps, where it says).
    pub fn version(self) -> String {
        match self {
            Kind::Basalt
            | Kind::BasaltFences
            | Kind::BasaltGetWith
            | Kind::BasaltNoMaps
            | Kind::BasaltBlobs => {
                format!("basalt {}", env!("CARGO_PKG_VERSION"))
            }
            Kind::Sqlite => sqlite::version(),
            Kind::Lmdb => lmdb::version(),
            Kind::Redb => format!("redb {}", env!("BENCH_VERSION_REDB")),
            Kind::Fjall => format!("fjall {}", env!("BENCH_VERSION_FJALL")),
            Kind::Rocksdb => format!("rust-rocksdb {}", env!("BENCH_VERSION_ROCKSDB")),
            Kind::Leveldb => format!("LevelDB 1.22 (leveldb-sys {})", env!("BENCH_VERSION_LEVELDB")),
        }
    }

    /// The settings this adapter opens the engine with, for the report.
    pub fn options(self, cfg: &Config) -> String {
        let cache = cfg.cache_bytes >> 20;
        let budget = cfg.write_buffer_budget_bytes.map(|b| b >> 20);
        match self {
            Kind::Basalt
            | Kind::BasaltFences
            | Kind::BasaltGetWith
            | Kind::BasaltNoMaps
            | Kind::BasaltBlobs => basalt::options(cfg, self),
            Kind::Sqlite => sqlite::options(cfg),
            Kind::Lmdb => lmdb::OPTIONS.to_string(),
            Kind::Redb => format!("cache {cache} MiB; Durability::None per batch, Immediate on settle"),
            Kind::Fjall => format!(
                "cache {cache} MiB; default keyspace options; journal flushed to the OS per batch; \
                 no write-buffer budget knob{}",
                if budget.is_some() { " (budget ignored)" } else { "" }
            ),
            Kind::Rocksdb => format!(
                "block cache {cache} MiB (LRU), 4 KiB blocks with a hash index, 10-bit bloom, index and \
                 filters held by the table readers, memtable whole-key bloom, 64 MiB memtables, no \
                 compression, bytes_per_sync 1 MiB, sync=false{}",
                budget.map_or(String::new(), |b| format!(", db_write_buffer_size {b} MiB"))
            ),
            Kind::Leveldb => format!(
                "LRU cache {cache} MiB, 10-bit bloom filter, 4 KiB blocks, 4 MiB write buffer, no compression, \
                 sync=false; settle = synced empty batch + full compact_range"
            ),
        }
    }
}

/// Opens engine `kind` in the empty directory `dir`.
pub fn open(kind: Kind, dir: &Path, cfg: &Config) -> Result<Box<dyn Engine>> {
    std::fs::create_dir_all(dir)?;
    Ok(match kind {
        Kind::Basalt | Kind::BasaltFences | Kind::BasaltGetWith | Kind::BasaltNoMaps | Kind::BasaltBlobs => {
            Box::new(basalt::BasaltEngine::open(dir, cfg, kind, false)?)
        }
        Kind::Sqlite => Box::new(sqlite::SqliteEngine::open(dir, cfg)?),
        Kind::Lmdb => Box::new(lmdb::LmdbEngine::open(dir, cfg)?),
        Kind::Redb => Box::new(redb::RedbEngine::open(dir, cfg)?),
        Kind::Fjall => Box::new(fjall::FjallEngine::open(dir, cfg)?),
        #[cfg(feature = "rocksdb")]
        Kind::Rocksdb => Box::new(rocksdb::RocksEngine::open(dir, cfg)?),
        #[cfg(feature = "leveldb")]
        Kind::Leveldb => Box::new(leveldb::LevelEngine::open(dir, cfg)?),
        #[allow(unreachable_patterns, reason = "which arms exist depends on the features")]
        other => {
            return Err(format!(
                "engine {} is not built into this binary: rebuild with `--features {}`",
                other.name(),
                other.name()
            )
            .into());
        }
    })
}

/// Reopens the database a Basalt engine of `kind` wrote in `dir` with
/// `Options::timing_stats` on, so that [`Engine::get_latency`] breaks its
/// lookups down by phase. Timing costs clock reads on every lookup, so the
/// timed phases never run with it: the breakdown is a pass of its own.
/// `None` for the other engines.
pub fn open_timed(kind: Kind, dir: &Path, cfg: &Config) -> Result<Option<Box<dyn Engine>>> {
    Ok(match kind {
        k if k.is_basalt() => Some(Box::new(basalt::BasaltEngine::open(dir, cfg, kind, true)?)),
        _ => None,
    })
}

/// Writes `n` rows, reads them back, scans a range and checks a missing
/// key: the correctness check every adapter passes before it is timed.
pub fn check(engine: &dyn Engine, n: u64) -> Result<()> {
    let key = |i: u64| (i * 2).to_be_bytes().to_vec();
    let rows: Vec<Row> = (0..n).map(|i| (key(i), format!("value-{i:08}-padding").into_bytes())).collect();
    for chunk in rows.chunks(97) {
        engine.write(chunk)?;
    }
    engine.settle()?;
    let mut reader = engine.reader()?;
    for (k, v) in &rows {
        let mut got = None;
        if !reader.get(k, &mut |value| got = Some(value.to_vec()))? || got.as_ref() != Some(v) {
            return Err(format!("check: key {k:?} read back {got:?}").into());
        }
    }
    if reader.get(&1u64.to_be_bytes(), &mut |_| {})? {
        return Err("check: a missing key was found".into());
    }
    let (lo, hi) = (n / 4, n / 2);
    let mut seen = Vec::new();
    let count =
        reader.scan(&key(lo), Some(&key(hi)), usize::MAX, &mut |k, v| seen.push((k.to_vec(), v.to_vec())))?;
    let expected = &rows[lo as usize..hi as usize];
    if count != expected.len() || seen != expected {
        return Err(format!("check: scan [{lo}, {hi}) gave {count} rows, expected {}", expected.len()).into());
    }
    let mut all = 0;
    if reader.scan(&[], None, usize::MAX, &mut |_, _| all += 1)? != rows.len() || all != rows.len() {
        return Err(format!("check: a full scan gave {all} rows, expected {n}").into());
    }
    let limited = reader.scan(&key(lo), None, 5, &mut |_, _| {})?;
    if limited != 5.min(n as usize - lo as usize) {
        return Err(format!("check: limited scan gave {limited} rows").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Integer keys, and byte keys with small and large rows (SQLite's two
    /// table layouts for them).
    fn test_configs() -> [Config; 3] {
        [(false, 16), (false, 1000), (true, 16)].map(|(int_keys, value_bytes)| Config {
            cache_bytes: 8 << 20,
            write_buffer_budget_bytes: None,
            int_keys,
            value_bytes,
        })
    }

    #[test]
    fn every_built_engine_passes_the_check() {
        for kind in Kind::built() {
            for cfg in test_configs() {
                let dir = tempfile::tempdir().expect("tempdir");
                let engine = open(kind, dir.path(), &cfg).expect("open");
                check(engine.as_ref(), 1_000).unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            }
        }
    }

    /// The harness's fairness rule for readers: an engine with read
    /// transactions holds one per reader (its lookups share it, so a write
    /// after the reader was taken is not seen), an engine without reads
    /// the latest data; a fresh reader sees every write.
    #[test]
    fn readers_hold_one_read_transaction_where_the_engine_has_them() {
        for kind in Kind::built() {
            for cfg in test_configs() {
                let dir = tempfile::tempdir().expect("tempdir");
                let engine = open(kind, dir.path(), &cfg).expect("open");
                let (k1, k2) = (5u64.to_be_bytes().to_vec(), 9u64.to_be_bytes().to_vec());
                engine.write(&[(k1.clone(), b"one".to_vec())]).expect("write");
                let read = |reader: &mut Box<dyn Reader + '_>, key: &[u8]| {
                    let mut got = None;
                    reader.get(key, &mut |v| got = Some(v.to_vec())).expect("get");
                    got
                };
                let mut reader = engine.reader().expect("reader");
                assert_eq!(read(&mut reader, &k1).as_deref(), Some(&b"one"[..]), "{}", kind.name());
                engine.write(&[(k1.clone(), b"two".to_vec()), (k2.clone(), b"new".to_vec())]).expect("write");
                let (v1, v2) = (read(&mut reader, &k1), read(&mut reader, &k2));
                if kind.reads_in_transactions() {
                    assert_eq!(
                        (v1.as_deref(), v2),
                        (Some(&b"one"[..]), None),
                        "{}: one transaction",
                        kind.name()
                    );
                } else {
                    assert_eq!(
                        (v1.as_deref(), v2.as_deref()),
                        (Some(&b"two"[..]), Some(&b"new"[..])),
                        "{}: latest data",
                        kind.name()
                    );
                }
                drop(reader);
                let mut fresh = engine.reader().expect("reader");
                assert_eq!(read(&mut fresh, &k1).as_deref(), Some(&b"two"[..]), "{}", kind.name());
                drop(fresh);
                engine.settle().unwrap_or_else(|e| panic!("{}: settle after readers: {e}", kind.name()));
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.name()), Some(kind));
        }
        assert!(Kind::built().contains(&Kind::Basalt));
        let json = serde_json::to_string(&Kind::BasaltFences).expect("json");
        assert_eq!(json, "\"basalt-fences\"");
        assert_eq!(serde_json::from_str::<Kind>(&json).expect("parse"), Kind::BasaltFences);
        assert_eq!(Kind::ALL[1], Kind::BasaltFences, "listed right after basalt");
        let defaults = Kind::defaults();
        assert!(defaults.contains(&Kind::BasaltFences) && !defaults.contains(&Kind::BasaltGetWith));
        assert!(Kind::ALL.iter().filter(|k| k.is_basalt()).count() == 5);
    }
}
