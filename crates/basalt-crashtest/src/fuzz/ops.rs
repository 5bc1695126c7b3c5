//! The `ops` target: random operations on a database holding the
//! key-value store and one table of a random schema, each read compared
//! with a model (`BTreeMap`s; see [`super::table_ops`] for the table's).
//!
//! An input is read as:
//!
//! ```text
//! options byte   bit 0 automatic compaction (L0 trigger 2), bit 1 no
//!                learned index, bit 2 LZ4, bit 3 reads by pread, not
//!                memory maps, bit 4 no Bloom filters, bits 5 and 6 the
//!                block size (64 bytes to 4 KiB), bit 7 memtables of
//!                4 KiB instead of 512 bytes
//! table          see `input::table_spec`
//! steps          an op byte (`% OPS`), then the op's arguments
//! ```
//!
//! Key-value ops (0 to 9) take two argument bytes each, as this target's
//! first version did: a key byte and a length byte.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use basalt::fs::Fs;
use basalt::testing::MemFs;
use basalt::{Compression, Db, Options, ReadOptions, Snapshot, Table, TableOptions, WriteBatch};

use super::input::{Input, table_spec};
use super::skip_caught_panics_in_hook;
use super::table_ops::{self, Rows, TableModel};

/// The op codes (an op byte is taken `% OPS`).
pub mod op {
    /// Puts a key (codes 0 and 1).
    pub const KV_PUT: u8 = 0;
    /// Deletes a key.
    pub const KV_DELETE: u8 = 2;
    /// Writes a batch of puts and deletes.
    pub const KV_BATCH: u8 = 3;
    /// Reads a key.
    pub const KV_GET: u8 = 4;
    /// Scans from a key, either way.
    pub const KV_SCAN: u8 = 5;
    /// Flushes the memtables.
    pub const FLUSH: u8 = 6;
    /// Compacts the key-value store (and waits for automatic compaction).
    pub const COMPACT: u8 = 7;
    /// Closes and reopens the database.
    pub const REOPEN: u8 = 8;
    /// Crashes the process (every appended byte kept), checks the image.
    pub const CRASH: u8 = 9;
    /// Writes table rows (codes 10 and 11).
    pub const TABLE_WRITE: u8 = 10;
    /// Deletes table keys.
    pub const TABLE_DELETE: u8 = 12;
    /// `Table::get`.
    pub const TABLE_GET: u8 = 13;
    /// `Table::get_many`.
    pub const TABLE_GET_MANY: u8 = 14;
    /// Scans the table (codes 15 and 16).
    pub const TABLE_SCAN: u8 = 15;
    /// One write batch of table rows, table deletes and a key-value put.
    pub const MIXED_BATCH: u8 = 17;
    /// Takes a snapshot (replacing the one held).
    pub const SNAPSHOT: u8 = 18;
    /// Reads at the snapshot: a table scan or get, or a key-value get.
    pub const SNAPSHOT_READ: u8 = 19;
    /// The number of op codes.
    pub const OPS: u8 = 20;

    /// The op an op byte stands for (the commonest ops have two codes).
    pub fn of(byte: u8) -> u8 {
        match byte % OPS {
            1 => KV_PUT,
            11 => TABLE_WRITE,
            16 => TABLE_SCAN,
            code => code,
        }
    }
}

/// Most steps of one input, and most reopens and crashes (each opens a
/// database, the slow part): one input runs in milliseconds.
const STEPS_MAX: usize = 128;
const RESTARTS_MAX: usize = 4;
/// The table's name.
const TABLE: &str = "t";

/// What a run reached: tests check that the seeds run every op and the
/// scan paths where bugs hid.
#[derive(Debug, Default, Clone, Copy)]
pub struct Coverage {
    /// Steps run, by op code.
    pub steps: [u32; op::OPS as usize],
    /// Rows scans handed out without copying (straight from SST blocks).
    pub zero_copy_rows: u64,
    /// Blocks scans skipped by their zone maps.
    pub blocks_skipped: u64,
}

impl Coverage {
    fn add_scan(&mut self, (zero_copy_rows, blocks_skipped): (u64, u64)) {
        self.zero_copy_rows += zero_copy_rows;
        self.blocks_skipped += blocks_skipped;
    }
}

/// A snapshot and the models as of it.
struct Snap {
    snapshot: Snapshot,
    table: Rows,
    kv: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// One input's database and models.
struct Run {
    fs: MemFs,
    options: Options,
    db: Option<Db>,
    table: Option<Table>,
    model: TableModel,
    kv: BTreeMap<Vec<u8>, Vec<u8>>,
    snap: Option<Snap>,
    restarts: usize,
    coverage: Coverage,
}

fn options_from(byte: u8, fs: &MemFs) -> Options {
    let auto = byte & 1 != 0;
    Options::default()
        .fs(Arc::new(fs.clone()))
        .memtable_bytes_max(if byte & 0x80 != 0 { 4 << 10 } else { 512 })
        .block_bytes_target(64 << (2 * ((byte >> 5) & 3)))
        .table_block_bytes_target(64 << (2 * ((byte >> 5) & 3)))
        .settled_block_bytes_target(64 << (2 * ((byte >> 5) & 3)))
        .auto_compaction(auto)
        .l0_compaction_trigger(2)
        // No write delays: they would sleep.
        .l0_files_slowdown(1000)
        .l0_files_stop(1001)
        .learned_index(byte & 2 == 0)
        .compression(if byte & 4 != 0 { Compression::Lz4 } else { Compression::None })
        .mmap_reads(byte & 8 == 0)
        .bloom_bits_per_key(if byte & 16 != 0 { 0 } else { 10 })
        .block_cache_bytes(4 << 10)
        // Blob files for an odd number of set bits (no bit is left).
        .blob_value_bytes_min(if byte.count_ones() % 2 == 1 { 16 } else { 0 })
}

impl Run {
    fn start(inp: &mut Input<'_>) -> Run {
        let fs = MemFs::new();
        let options = options_from(inp.byte(), &fs);
        let spec = table_spec(inp);
        let db = Db::open("/db", options.clone()).expect("open a new database");
        let key: Vec<&str> = spec.key.iter().map(|&i| spec.schema.field(i).name().as_str()).collect();
        if let Some(invalid) = &spec.invalid {
            let refused = db.create_table(TABLE, invalid.clone(), &key, TableOptions::default());
            assert!(refused.is_err(), "create_table accepted a Decimal128 key: {invalid:?}");
        }
        let table = db
            .create_table(TABLE, spec.given.clone(), &key, TableOptions::default())
            .unwrap_or_else(|e| panic!("create_table of {:?} keyed by {key:?}: {e}", spec.schema));
        table_ops::check_created(&table, &spec);
        Run {
            fs,
            options,
            db: Some(db),
            table: Some(table),
            model: TableModel::new(spec),
            kv: BTreeMap::new(),
            snap: None,
            restarts: 0,
            coverage: Coverage::default(),
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("the database is open between steps")
    }

    fn table(&self) -> &Table {
        self.table.as_ref().expect("the table is open between steps")
    }

    fn step(&mut self, inp: &mut Input<'_>) {
        let mut code = op::of(inp.byte());
        if matches!(code, op::REOPEN | op::CRASH) {
            self.restarts += 1;
            if self.restarts > RESTARTS_MAX {
                code = op::FLUSH;
            }
        }
        match code {
            0..=op::CRASH => self.kv_step(code, inp.byte(), inp.byte()),
            op::TABLE_DELETE => table_ops::delete(self.table.as_ref().expect("open"), &mut self.model, inp),
            op::TABLE_GET => table_ops::get(self.table(), &self.model, &self.model.rows, inp, None),
            op::TABLE_GET_MANY => table_ops::get_many(self.table(), &self.model, inp),
            op::TABLE_SCAN => {
                let paths = table_ops::scan(self.table(), &self.model, &self.model.rows, inp, None);
                self.coverage.add_scan(paths);
            }
            op::MIXED_BATCH => {
                let (db, table) = (self.db.as_ref().expect("open"), self.table.as_ref().expect("open"));
                table_ops::mixed_batch(db, table, &mut self.model, &mut self.kv, inp);
            }
            op::SNAPSHOT => {
                let snapshot = self.db().snapshot();
                self.snap = Some(Snap { snapshot, table: self.model.rows.clone(), kv: self.kv.clone() });
            }
            op::SNAPSHOT_READ => self.snapshot_read(inp),
            op::TABLE_WRITE => table_ops::write(self.table.as_ref().expect("open"), &mut self.model, inp),
            _ => unreachable!("op code {code} is no op"),
        }
        self.coverage.steps[usize::from(code)] += 1;
    }

    fn snapshot_read(&mut self, inp: &mut Input<'_>) {
        let Some(snap) = &self.snap else { return };
        let table = self.table();
        match inp.byte() % 3 {
            0 => {
                let paths = table_ops::scan(table, &self.model, &snap.table, inp, Some(&snap.snapshot));
                self.coverage.add_scan(paths);
            }
            1 => table_ops::get(table, &self.model, &snap.table, inp, Some(&snap.snapshot)),
            _ => {
                let key = vec![b'k', inp.byte() % 32];
                let got = self.db().get_opt(&key, &ReadOptions::default().snapshot(Some(&snap.snapshot)));
                let got = got.expect("get at a snapshot").map(|v| v.to_vec());
                assert_eq!(got.as_ref(), snap.kv.get(&key), "get of {key:?} at a snapshot");
            }
        }
    }

    /// The key-value store's ops, and flush, compaction and restarts.
    fn kv_step(&mut self, code: u8, key_byte: u8, n: u8) {
        let d = self.db.as_ref().expect("the database is open between steps");
        let (key, n) = (vec![b'k', key_byte % 32], usize::from(n));
        let value = vec![key_byte; n % 64];
        match code {
            op::KV_PUT => {
                d.put(&key, &value).expect("put");
                self.kv.insert(key, value);
            }
            op::KV_DELETE => {
                d.delete(&key).expect("delete");
                self.kv.remove(&key);
            }
            op::KV_BATCH => {
                let mut wb = WriteBatch::new();
                for i in 0..n % 8 {
                    let k = vec![b'k', (key_byte.wrapping_add(i as u8)) % 32];
                    if i % 3 == 2 {
                        wb.delete(&k);
                        self.kv.remove(&k);
                    } else {
                        wb.put(&k, &value);
                        self.kv.insert(k, value.clone());
                    }
                }
                d.write(wb).expect("batch");
            }
            op::KV_GET => {
                let got = d.get(&key).expect("get").map(|v| v.to_vec());
                assert_eq!(got.as_ref(), self.kv.get(&key), "get of {key:?}");
            }
            op::KV_SCAN => check_scan(d, &self.kv, &key, n % 2 == 0),
            op::FLUSH => d.flush().expect("flush"),
            op::COMPACT => {
                d.compact_range::<&[u8]>(..).expect("compact_range");
                if self.options.auto_compaction {
                    // Tables have no compact_range: their trees compact
                    // only automatically.
                    d.wait_for_background_work().expect("background work");
                }
            }
            op::REOPEN => {
                self.close();
                self.open("after a reopen");
            }
            _ => self.crash(),
        }
    }

    /// Drops the handles and closes the database.
    fn close(&mut self) {
        self.snap = None;
        self.table = None;
        self.db.take().expect("open").close().expect("close");
    }

    fn open(&mut self, what: &str) {
        let db = Db::open("/db", self.options.clone()).unwrap_or_else(|e| panic!("open {what}: {e}"));
        self.table = Some(db.table(TABLE).unwrap_or_else(|e| panic!("the table {what}: {e}")));
        self.db = Some(db);
    }

    /// A crash of the process: every appended byte kept, so the image
    /// holds every write. The run goes on with the image.
    fn crash(&mut self) {
        let image = self.fs.process_crash();
        self.snap = None;
        self.table = None;
        drop(self.db.take());
        self.options.fs = Arc::new(image.clone());
        self.fs = image;
        self.open("after a process crash");
        self.check_all("after a process crash");
    }

    fn check_all(&self, what: &str) {
        check_scan(self.db(), &self.kv, b"", true);
        table_ops::check_all(self.table(), &self.model, what);
    }
}

/// Runs an input (see the module's comment). Every read must match the
/// models; a mismatch or an unexpected error panics.
pub fn ops(data: &[u8]) {
    run_ops(data);
}

/// [`ops`], returning what the run reached.
pub fn run_ops(data: &[u8]) -> Coverage {
    skip_caught_panics_in_hook();
    let mut inp = Input::new(data);
    let mut run = Run::start(&mut inp);
    for _ in 0..STEPS_MAX {
        if inp.is_empty() {
            break;
        }
        run.step(&mut inp);
    }
    run.check_all("at the end");
    let _ = run.fs.list(Path::new("/db"));
    run.coverage
}

fn check_scan(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, from: &[u8], forward: bool) {
    let items = if forward { db.iter(from.to_vec()..) } else { db.iter_rev(from.to_vec()..) };
    let got: Vec<(Vec<u8>, Vec<u8>)> =
        items.map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("scan")).collect();
    let want = model.range(from.to_vec()..).map(|(k, v)| (k.clone(), v.clone()));
    let want: Vec<_> = if forward { want.collect() } else { want.rev().collect() };
    assert_eq!(got, want, "scan from {from:?} forward={forward}");
}
