//! Basalt: default options except the block cache (the shared budget) and
//! the write-buffer budget when one is asked for. Lookups call `Db::get`,
//! as the README teaches (the value comes back as owned `Bytes`); scans
//! step with `DbIterator::next_borrowed` (keys and values borrowed until
//! the next step, as every peer's scan hands them to the visitor). Variants,
//! each one change: `basalt-fences` turns the learned index off,
//! `basalt-get-with` looks up with `Db::get_with` (the value borrowed where
//! it lies, no copy), `basalt-nomaps` reads SSTs with `pread` into the
//! block cache instead of through memory maps (`mmap_reads: false`),
//! `basalt-blobs` keeps values of 2 KiB and more in blob files
//! (`blob_value_bytes_min`).

use std::path::Path;

use basalt::{Db, GetLatency, Options, WriteBatch, WriteOptions};

use super::{Config, Engine, Kind, Reader, Result, Row, Update};

/// The `basalt-blobs` variant's separation threshold.
const BLOB_VALUE_BYTES_MIN: usize = 2 << 10;

fn db_options(cfg: &Config, kind: Kind) -> Options {
    let mut options = Options::default()
        .block_cache_bytes(cfg.cache_bytes)
        .learned_index(kind != Kind::BasaltFences)
        .mmap_reads(kind != Kind::BasaltNoMaps);
    if kind == Kind::BasaltBlobs {
        options.blob_value_bytes_min = BLOB_VALUE_BYTES_MIN;
    }
    if let Some(budget) = cfg.write_buffer_budget_bytes {
        options.write_buffer_bytes_max = budget;
    }
    options
}

/// The settings of `kind` (`basalt` or `basalt-fences`), for the report.
pub fn options(cfg: &Config, kind: Kind) -> String {
    let o = db_options(cfg, kind);
    format!(
        "{}; block cache {} MiB, {}, {} KiB blocks, {}-bit bloom, {}, {} MiB memtables, write-buffer budget \
         {} MiB, compression {:?}, {}, sync=false",
        if kind == Kind::BasaltGetWith { "lookups by Db::get_with (borrowed)" } else { "lookups by Db::get" },
        o.block_cache_bytes >> 20,
        if o.mmap_reads { "SSTs read through memory maps" } else { "SSTs read with pread (maps off)" },
        o.block_bytes_target >> 10,
        o.bloom_bits_per_key,
        if o.learned_index {
            format!("learned index on (epsilon {})", o.learned_index_epsilon)
        } else {
            "learned index off (fence keys)".to_string()
        },
        o.memtable_bytes_max >> 20,
        o.write_buffer_bytes_max >> 20,
        o.compression,
        match o.blob_value_bytes_min {
            0 => "values inline".to_string(),
            n => format!("values of {n} bytes and more in blob files"),
        },
    )
}

/// An open Basalt database.
pub struct BasaltEngine {
    db: Db,
    timed: bool,
    borrow: bool,
}

impl BasaltEngine {
    /// Opens a database of `kind` (`basalt` or `basalt-fences`) in `dir`,
    /// with `Options::timing_stats` when `timed`.
    pub fn open(dir: &Path, cfg: &Config, kind: Kind, timed: bool) -> Result<BasaltEngine> {
        let options = db_options(cfg, kind).timing_stats(timed);
        Ok(BasaltEngine { db: Db::open(dir, options)?, timed, borrow: kind == Kind::BasaltGetWith })
    }
}

impl Engine for BasaltEngine {
    fn write(&self, rows: &[Row]) -> Result<()> {
        let mut batch = WriteBatch::new();
        for (k, v) in rows {
            batch.put(k, v);
        }
        Ok(self.db.write_opt(batch, &WriteOptions::default().sync(false))?)
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(BasaltReader { db: &self.db, borrow: self.borrow }))
    }

    fn transact(&self, keys: &[&[u8]], update: &mut Update<'_>) -> Result<bool> {
        // Plain reads: every key read is written, and written keys are
        // checked at commit.
        let mut tx = self.db.transaction();
        let read = keys.iter().map(|k| tx.get(k)).collect::<basalt::Result<Vec<_>>>()?;
        for (i, (k, old)) in keys.iter().zip(&read).enumerate() {
            tx.put(k, update(i, old.as_deref()))?;
        }
        match tx.commit() {
            Ok(()) => Ok(true),
            Err(basalt::Error::Conflict(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        self.db.wait_for_background_work()?;
        Ok(self.db.sync_wal()?)
    }

    fn has_write_buffer_budget(&self) -> bool {
        true
    }

    fn get_latency(&self) -> Option<GetLatency> {
        self.timed.then(|| self.db.stats().get_latency)
    }

    fn engine_memory_bytes(&self) -> Option<u64> {
        Some(self.db.stats().engine_memory_bytes())
    }

    fn write_breakdown(&self) -> Vec<(&'static str, f64, &'static str)> {
        let s = self.db.stats();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        vec![
            ("write_stall_ms", ms(s.write_stall_time), "ms"),
            ("write_stalls", s.write_stalls as f64, "count"),
            ("write_delay_ms", ms(s.write_delay_time), "ms"),
            ("write_delayed_groups", s.delayed_groups as f64, "count"),
            ("memtable_switch_ms", ms(s.memtable_switch_time), "ms"),
            ("memtable_switches", s.memtable_switches as f64, "count"),
            ("memtable_peak_bytes", s.memtable_bytes_peak as f64, "bytes"),
            ("flush_ms", ms(s.flush_time), "ms"),
            ("flushes", s.flushes as f64, "count"),
            ("compaction_ms", ms(s.compaction_time), "ms"),
            ("compactions", s.compactions as f64, "count"),
            ("trivial_moves", s.trivial_moves as f64, "count"),
            ("compaction_written_bytes", s.compaction_written_bytes as f64, "bytes"),
        ]
    }
}

struct BasaltReader<'a> {
    db: &'a Db,
    borrow: bool,
}

impl Reader for BasaltReader<'_> {
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
        if self.borrow {
            return Ok(self.db.get_with(key, check)?.is_some());
        }
        Ok(self.db.get(key)?.map(|value| check(&value)).is_some())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut iter = match end {
            Some(end) => self.db.iter(start..end),
            None => self.db.iter(start..),
        };
        let mut n = 0;
        while n < limit
            && let Some(kv) = iter.next_borrowed()
        {
            let (k, v) = kv?;
            visit(k, v);
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookups(kind: Kind, timed: bool) -> (basalt::Stats, Option<GetLatency>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg =
            Config { cache_bytes: 8 << 20, write_buffer_budget_bytes: None, int_keys: true, value_bytes: 16 };
        let engine = BasaltEngine::open(dir.path(), &cfg, kind, timed).expect("open");
        let rows: Vec<Row> = (0..2_000u64).map(|i| (i.to_be_bytes().to_vec(), vec![7; 16])).collect();
        engine.write(&rows).expect("write");
        engine.settle().expect("settle");
        let mut reader = engine.reader().expect("reader");
        for (k, _) in &rows {
            assert!(reader.get(k, &mut |_| {}).expect("get"));
        }
        drop(reader);
        (engine.db.stats(), engine.get_latency())
    }

    #[test]
    fn fences_variant_has_no_model_and_timing_is_opt_in() {
        let (on, latency) = lookups(Kind::Basalt, false);
        assert!(on.lookups_by_model > 0 && on.lookups_by_fences == 0, "{on:?}");
        assert_eq!(latency, None);
        assert_eq!(on.get_latency.gets, 0, "no timing unless asked");
        let (off, latency) = lookups(Kind::BasaltFences, true);
        assert!(off.lookups_by_model == 0 && off.lookups_by_fences > 0, "{off:?}");
        let latency = latency.expect("timed");
        assert_eq!(latency.gets, 2_000);
        assert!(latency.index_ns > 0.0 && latency.block_ns > 0.0, "{latency:?}");
        assert!(
            options(
                &Config { cache_bytes: 0, write_buffer_budget_bytes: None, int_keys: true, value_bytes: 16 },
                Kind::BasaltFences
            )
            .contains("learned index off")
        );
    }
}
