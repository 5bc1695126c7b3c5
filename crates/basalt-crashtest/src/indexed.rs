//! The indexed-table workload: each batch upserts and deletes rows of one
//! table, `people` (keyed by thread and id), that carries four secondary
//! indexes, in one atomic write. Writer 0 drops and rebuilds one of the
//! indexes now and then while the other writers go on, so kills land in
//! the middle of index creation and backfill too.
//!
//! The check compares the rows with the model, as the tables workload
//! does, and then every index the table lists with the rows: each
//! covering index's entries (read by a lookup that needs no row fetch)
//! must be exactly the rows' indexed and included values, and the float
//! index, whose entries cannot be decoded back, must find every row once
//! by lookup and by count.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{
    Db, Error, IndexOptions, IndexPredicate, KeyValue, LookupOptions, ScanOptions, Table, TableOptions,
    WriteBatch, WriteOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::workload::{Model, Workload, apply_changes as apply, judge};

const TABLE: &str = "people";
/// Ids per writer thread.
const IDS_PER_THREAD: i64 = 300;
/// Writer 0 rebuilds [`REBUILT`] before every batch whose id is this
/// much past a multiple of [`REBUILD_EVERY`].
const REBUILD_EVERY: u64 = 40;
const REBUILT: &str = "by_score";

/// Cities, with the codec's edge cases: empty, embedded zero bytes, a
/// prefix of another, non-ASCII.
const CITIES: [&str; 6] = ["", "a", "a\0b", "ab", "Zürich", "\0"];
/// Scores, with the integer edges.
const SCORE_EDGES: [i64; 4] = [i64::MIN, -1, 0, i64::MAX];
/// Weights, with the float edges (an index on floats orders them all).
const WEIGHT_EDGES: [f64; 6] = [-0.0, 0.0, f64::NAN, -f64::NAN, f64::NEG_INFINITY, f64::INFINITY];

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("thread", DataType::Int32, false),
        Field::new("id", DataType::Int64, false),
        Field::new("batch", DataType::Int64, false),
        Field::new("city", DataType::Utf8, true),
        Field::new("score", DataType::Int64, false),
        Field::new("tag", DataType::Int64, false),
        Field::new("weight", DataType::Float64, false),
    ]))
}

/// The indexes: name, columns, options. Every one leads with `thread`, so
/// a thread's entries are one prefix.
fn indexes() -> Vec<(&'static str, Vec<&'static str>, IndexOptions)> {
    let include = |cols: &[&str]| cols.iter().map(|c| (*c).to_string()).collect::<Vec<_>>();
    vec![
        ("by_city", vec!["thread", "city"], IndexOptions::default().include(include(&["batch", "weight"]))),
        ("by_tag", vec!["thread", "tag"], IndexOptions::default().unique(true)),
        (REBUILT, vec!["thread", "score", "city"], IndexOptions::default()),
        ("by_weight", vec!["thread", "weight"], IndexOptions::default()),
    ]
}

/// One row: id, city, score, weight (the tag follows from the id).
type Row = (i64, Option<&'static str>, i64, f64);

/// The rows of one batch.
struct Rows {
    upserts: Vec<Row>,
    deletes: Vec<i64>,
}

/// A row's tag: unique per id, so the unique index is never violated,
/// yet each update rewrites its entry's row.
fn tag(id: i64) -> i64 {
    id * 7 - 1000
}

fn rows(seed: u64, thread: u32, id: u64) -> Rows {
    let mut rng = StdRng::seed_from_u64(crate::mix(&[seed, 0x6964, u64::from(thread), id]));
    let mut upserts = Vec::new();
    for _ in 0..rng.random_range(1..=6) {
        let city = rng.random_bool(0.85).then(|| CITIES[rng.random_range(0..CITIES.len())]);
        let score = if rng.random_bool(0.1) {
            SCORE_EDGES[rng.random_range(0..SCORE_EDGES.len())]
        } else {
            rng.random_range(-20..20)
        };
        let weight = if rng.random_bool(0.2) {
            WEIGHT_EDGES[rng.random_range(0..WEIGHT_EDGES.len())]
        } else {
            f64::from(rng.random_range(-50..50i32)) / 4.0
        };
        upserts.push((rng.random_range(0..IDS_PER_THREAD), city, score, weight));
    }
    let deletes = (0..rng.random_range(0..=2)).map(|_| rng.random_range(0..IDS_PER_THREAD)).collect();
    Rows { upserts, deletes }
}

/// A row as the model and the check render it. Floats by their bits, so
/// -0.0 and each NaN are told apart.
fn render(batch: i64, city: Option<&str>, score: i64, tag: i64, weight: f64) -> String {
    format!("batch {batch} city {city:?} score {score} tag {tag} weight {:#x}", weight.to_bits())
}

/// A batch's effect on the model: id → row, `None` for a delete; deletes
/// after upserts, as written.
fn changes(seed: u64, thread: u32, id: u64) -> Vec<(i64, Option<String>)> {
    let r = rows(seed, thread, id);
    let batch = id as i64;
    let mut out: Vec<(i64, Option<String>)> = r
        .upserts
        .iter()
        .map(|&(k, city, score, weight)| (k, Some(render(batch, city, score, tag(k), weight))))
        .collect();
    out.extend(r.deletes.iter().map(|&k| (k, None)));
    out
}

fn arrow_error(e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(e.to_string())
}

/// The indexed-table workload; see the module docs.
pub struct IndexedWorkload {
    seed: u64,
    table: OnceLock<Table>,
}

impl IndexedWorkload {
    pub fn new(seed: u64) -> IndexedWorkload {
        IndexedWorkload { seed, table: OnceLock::new() }
    }
}

/// Creates the index `name` as [`indexes`] declares it.
fn create_index(table: &Table, name: &str) -> basalt::Result<()> {
    let (_, columns, opts) = indexes()
        .into_iter()
        .find(|(n, _, _)| *n == name)
        .ok_or_else(|| Error::InvalidArgument(format!("no index {name} declared")))?;
    table.create_index(name, &columns, opts)
}

impl Workload for IndexedWorkload {
    fn name(&self) -> &'static str {
        "indexed"
    }

    fn prepare(&self, db: &Db) -> basalt::Result<()> {
        let table = match db.table(TABLE) {
            Ok(t) => t,
            Err(_) => db.create_table(TABLE, schema(), &["thread", "id"], TableOptions::default())?,
        };
        let present = table.indexes();
        for (name, _, _) in indexes() {
            if !present.iter().any(|i| i.name == name) {
                create_index(&table, name)?;
            }
        }
        let _ = self.table.set(table);
        Ok(())
    }

    fn write(&self, db: &Db, thread: u32, id: u64, sync: bool) -> basalt::Result<()> {
        let table = self.table.get().ok_or_else(|| Error::InvalidArgument("not prepared".into()))?;
        if thread == 0 && id % REBUILD_EVERY == REBUILD_EVERY / 2 {
            // A kill between the two leaves no index; the next prepare
            // makes it again.
            if table.indexes().iter().any(|i| i.name == REBUILT) {
                table.drop_index(REBUILT)?;
            }
            create_index(table, REBUILT)?;
        }
        let r = rows(self.seed, thread, id);
        let t = thread as i32;
        let n = r.upserts.len();
        let rows = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int32Array::from(vec![t; n])),
                Arc::new(Int64Array::from(r.upserts.iter().map(|u| u.0).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(vec![id as i64; n])),
                Arc::new(StringArray::from(r.upserts.iter().map(|u| u.1).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(r.upserts.iter().map(|u| u.2).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(r.upserts.iter().map(|u| tag(u.0)).collect::<Vec<_>>())),
                Arc::new(Float64Array::from(r.upserts.iter().map(|u| u.3).collect::<Vec<_>>())),
            ],
        )
        .map_err(arrow_error)?;
        let key_schema = Arc::new(Schema::new(vec![
            Field::new("thread", DataType::Int32, false),
            Field::new("id", DataType::Int64, false),
        ]));
        let n = r.deletes.len();
        let deletes = RecordBatch::try_new(
            key_schema,
            vec![Arc::new(Int32Array::from(vec![t; n])) as ArrayRef, Arc::new(Int64Array::from(r.deletes))],
        )
        .map_err(arrow_error)?;
        let mut wb = WriteBatch::new();
        wb.put_table(table, &rows)?;
        wb.delete_table(table, &deletes)?;
        db.write_opt(wb, &WriteOptions::default().sync(sync))
    }

    fn model(&self, thread: u32) -> Box<dyn Model> {
        Box::new(IndexedModel { seed: self.seed, thread, state: BTreeMap::new() })
    }
}

/// One thread's rows, id → rendering.
struct IndexedModel {
    seed: u64,
    thread: u32,
    state: BTreeMap<i64, String>,
}

/// Renders the rows of `batches` (the table's columns, or any projection
/// of them by name) one string per row, keyed by id.
fn render_rows(batches: &[RecordBatch]) -> Result<Vec<(i64, String)>, String> {
    let mut out = Vec::new();
    for b in batches {
        let col = |name: &str| b.column_by_name(name).ok_or_else(|| format!("no column {name} returned"));
        let id = col("id")?.as_primitive::<Int64Type>();
        let thread = col("thread")?.as_primitive::<Int32Type>();
        let field = |name: &str, i: usize| -> Option<String> {
            let a = b.column_by_name(name)?;
            Some(match a.data_type() {
                DataType::Int64 => a.as_primitive::<Int64Type>().value(i).to_string(),
                DataType::Float64 => format!("{:#x}", a.as_primitive::<Float64Type>().value(i).to_bits()),
                _ => {
                    let s = a.as_string::<i32>();
                    format!("{:?}", (!s.is_null(i)).then(|| s.value(i)))
                }
            })
        };
        for i in 0..b.num_rows() {
            let rest: Vec<String> = ["batch", "city", "score", "tag", "weight"]
                .iter()
                .filter_map(|c| field(c, i).map(|v| format!("{c} {v}")))
                .collect();
            out.push((id.value(i), format!("thread {} {}", thread.value(i), rest.join(" "))));
        }
    }
    Ok(out)
}

/// The rows of `thread`, by a key-range scan.
fn scan_thread(
    table: &Table,
    thread: u32,
    projection: Option<Vec<String>>,
) -> Result<Vec<RecordBatch>, String> {
    let prefix = vec![KeyValue::I32(thread as i32)];
    let opts = ScanOptions::default()
        .range((Bound::Included(prefix.clone()), Bound::Included(prefix)))
        .projection(projection);
    let scan = table.scan(opts).map_err(|e| format!("scan of {TABLE}: {e}"))?;
    scan.collect::<basalt::Result<Vec<_>>>().map_err(|e| format!("scan of {TABLE}: {e}"))
}

/// Checks every index `table` lists against the rows of `thread`.
fn check_indexes(table: &Table, thread: u32) -> Result<(), String> {
    let prefix = || IndexPredicate::Prefix(vec![Some(KeyValue::I32(thread as i32))]);
    for info in table.indexes() {
        let name = &info.name;
        let err = |what: &str, e: Error| format!("index {name}, thread {thread}: {what}: {e}");
        let mut columns: Vec<String> = vec!["thread".into(), "id".into()];
        for c in info.columns.iter().chain(&info.include) {
            if !columns.contains(c) {
                columns.push(c.clone());
            }
        }
        // Floats in an index key cannot be decoded back: such an index is
        // checked through its row fetches instead of its entries alone.
        let covering = !info.columns.iter().any(|c| c == "weight");
        let projection = covering.then(|| columns.clone());
        let want = render_rows(&scan_thread(table, thread, projection.clone())?)?;
        let found = table
            .lookup(name, prefix(), LookupOptions::default().projection(projection))
            .map_err(|e| err("lookup", e))?;
        let mut got = render_rows(&[found])?;
        got.sort();
        let count = table.count(name, prefix()).map_err(|e| err("count", e))?;
        if got != want || count != want.len() as u64 {
            let diff = got.iter().zip(&want).find(|(g, w)| g != w);
            return Err(format!(
                "index {name}, thread {thread}: {} entries (count {count}) for {} rows; first difference: {diff:?}",
                got.len(),
                want.len()
            ));
        }
    }
    Ok(())
}

impl Model for IndexedModel {
    fn apply(&mut self, id: u64) {
        apply(&mut self.state, changes(self.seed, self.thread, id));
    }

    fn check(&self, db: &Db, pending: Option<u64>) -> Result<bool, String> {
        let mut got = BTreeMap::new();
        // A kill before the first prepare finished leaves no table.
        let table = db.table(TABLE).ok();
        if let Some(table) = &table {
            for b in scan_thread(table, self.thread, None)? {
                let (batch, score, tag) = (
                    b.column(2).as_primitive::<Int64Type>(),
                    b.column(4).as_primitive::<Int64Type>(),
                    b.column(5).as_primitive::<Int64Type>(),
                );
                let (id, city, weight) = (
                    b.column(1).as_primitive::<Int64Type>(),
                    b.column(3).as_string::<i32>(),
                    b.column(6).as_primitive::<Float64Type>(),
                );
                for i in 0..b.num_rows() {
                    let city = (!city.is_null(i)).then(|| city.value(i));
                    got.insert(
                        id.value(i),
                        render(batch.value(i), city, score.value(i), tag.value(i), weight.value(i)),
                    );
                }
            }
        }
        let who = format!("indexed thread {}", self.thread);
        let apply_pending = |state: &mut BTreeMap<_, _>, p| apply(state, changes(self.seed, self.thread, p));
        let applied = judge(&who, &got, &self.state, pending, apply_pending, |v| {
            v.map_or("nothing".into(), Clone::clone)
        })?;
        if let Some(table) = &table {
            check_indexes(table, self.thread)?;
        }
        Ok(applied)
    }
}
