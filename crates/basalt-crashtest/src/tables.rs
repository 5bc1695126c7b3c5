//! The Arrow tables workload: each batch upserts and deletes rows of two
//! tables (`orders`, keyed by thread and order; `lines`, keyed by thread,
//! order and line) and puts one key of the key-value store, all in one
//! atomic write. Every row carries the id of the batch that wrote it.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{Db, Error, KeyValue, ScanOptions, Table, TableOptions, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::workload::{Model, Workload, apply_changes as apply, judge};

/// Orders per writer thread.
const ORDERS_PER_THREAD: i64 = 500;
/// Lines per order, at most.
const LINES_PER_ORDER: i32 = 4;

fn orders_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("thread", DataType::Int32, false),
        Field::new("order", DataType::Int64, false),
        Field::new("batch", DataType::Int64, false),
        Field::new("amount", DataType::Float64, false),
        Field::new("note", DataType::Utf8, true),
    ]))
}

fn lines_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("thread", DataType::Int32, false),
        Field::new("order", DataType::Int64, false),
        Field::new("line", DataType::Int32, false),
        Field::new("batch", DataType::Int64, false),
        Field::new("qty", DataType::Int32, false),
    ]))
}

/// One batch, in model form: keys (`orders/<order>`, `lines/<order>/<line>`,
/// `kv/<key>`) to the row's rendering, or `None` for a delete.
type Changes = Vec<(String, Option<String>)>;

/// The rows of one batch, in the form the tables take.
struct Rows {
    orders: Vec<(i64, f64, Option<String>)>,
    order_deletes: Vec<i64>,
    lines: Vec<(i64, i32, i32)>,
    line_deletes: Vec<(i64, i32)>,
    kv: (Vec<u8>, Vec<u8>),
}

fn rows(seed: u64, thread: u32, id: u64) -> Rows {
    let mut rng = StdRng::seed_from_u64(crate::mix(&[seed, 0x7461, u64::from(thread), id]));
    let mut r = Rows {
        orders: Vec::new(),
        order_deletes: Vec::new(),
        lines: Vec::new(),
        line_deletes: Vec::new(),
        kv: (format!("tables/{thread:02}/last").into_bytes(), format!("batch {id}").into_bytes()),
    };
    for _ in 0..rng.random_range(1..=6) {
        let order = rng.random_range(0..ORDERS_PER_THREAD);
        let note = rng.random_bool(0.7).then(|| "x".repeat(rng.random_range(0..200)));
        r.orders.push((order, f64::from(rng.random_range(0..100_000u32)) / 100.0, note));
        for line in 0..rng.random_range(0..=LINES_PER_ORDER) {
            r.lines.push((order, line, rng.random_range(1..100)));
        }
    }
    for _ in 0..rng.random_range(0..=2) {
        let order = rng.random_range(0..ORDERS_PER_THREAD);
        r.order_deletes.push(order);
        r.line_deletes.push((order, rng.random_range(0..LINES_PER_ORDER)));
    }
    r
}

fn order_row(batch: i64, amount: f64, note: Option<&str>) -> String {
    format!("batch {batch} amount {amount} note {note:?}")
}

fn line_row(batch: i64, qty: i32) -> String {
    format!("batch {batch} qty {qty}")
}

/// A batch's effect, in order: deletes after upserts, as written.
fn changes(seed: u64, thread: u32, id: u64) -> Changes {
    let r = rows(seed, thread, id);
    let batch = id as i64;
    let mut out: Changes = Vec::new();
    for (order, amount, note) in &r.orders {
        out.push((format!("orders/{order}"), Some(order_row(batch, *amount, note.as_deref()))));
    }
    for (order, line, qty) in &r.lines {
        out.push((format!("lines/{order}/{line}"), Some(line_row(batch, *qty))));
    }
    for order in &r.order_deletes {
        out.push((format!("orders/{order}"), None));
    }
    for (order, line) in &r.line_deletes {
        out.push((format!("lines/{order}/{line}"), None));
    }
    out.push((
        format!("kv/{}", String::from_utf8_lossy(&r.kv.0)),
        Some(String::from_utf8_lossy(&r.kv.1).into()),
    ));
    out
}

fn arrow_error(e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(e.to_string())
}

fn record_batch(schema: SchemaRef, columns: Vec<ArrayRef>) -> basalt::Result<RecordBatch> {
    RecordBatch::try_new(schema, columns).map_err(arrow_error)
}

/// The tables workload; see the module docs.
pub struct TablesWorkload {
    seed: u64,
    tables: OnceLock<(Table, Table)>,
}

impl TablesWorkload {
    pub fn new(seed: u64) -> TablesWorkload {
        TablesWorkload { seed, tables: OnceLock::new() }
    }
}

/// Opens the table `name`, creating it if missing.
pub(crate) fn open_or_create(db: &Db, name: &str, schema: SchemaRef, key: &[&str]) -> basalt::Result<Table> {
    match db.table(name) {
        Ok(t) => Ok(t),
        Err(_) => db.create_table(name, schema, key, TableOptions::default()),
    }
}

fn tables(db: &Db) -> basalt::Result<(Table, Table)> {
    Ok((
        open_or_create(db, "orders", orders_schema(), &["thread", "order"])?,
        open_or_create(db, "lines", lines_schema(), &["thread", "order", "line"])?,
    ))
}

impl Workload for TablesWorkload {
    fn name(&self) -> &'static str {
        "tables"
    }

    fn prepare(&self, db: &Db) -> basalt::Result<()> {
        let t = tables(db)?;
        let _ = self.tables.set(t);
        Ok(())
    }

    fn write(&self, db: &Db, thread: u32, id: u64, sync: bool) -> basalt::Result<()> {
        let (orders, lines) =
            self.tables.get().ok_or_else(|| Error::InvalidArgument("not prepared".into()))?;
        let r = rows(self.seed, thread, id);
        let t = thread as i32;
        let batch = id as i64;
        let mut wb = WriteBatch::new();
        let n = r.orders.len();
        wb.put_table(
            orders,
            &record_batch(
                orders_schema(),
                vec![
                    Arc::new(Int32Array::from(vec![t; n])),
                    Arc::new(Int64Array::from(r.orders.iter().map(|o| o.0).collect::<Vec<_>>())),
                    Arc::new(Int64Array::from(vec![batch; n])),
                    Arc::new(Float64Array::from(r.orders.iter().map(|o| o.1).collect::<Vec<_>>())),
                    Arc::new(StringArray::from(r.orders.iter().map(|o| o.2.clone()).collect::<Vec<_>>())),
                ],
            )?,
        )?;
        let n = r.lines.len();
        wb.put_table(
            lines,
            &record_batch(
                lines_schema(),
                vec![
                    Arc::new(Int32Array::from(vec![t; n])),
                    Arc::new(Int64Array::from(r.lines.iter().map(|l| l.0).collect::<Vec<_>>())),
                    Arc::new(Int32Array::from(r.lines.iter().map(|l| l.1).collect::<Vec<_>>())),
                    Arc::new(Int64Array::from(vec![batch; n])),
                    Arc::new(Int32Array::from(r.lines.iter().map(|l| l.2).collect::<Vec<_>>())),
                ],
            )?,
        )?;
        let key = |fields: &[(&str, DataType)]| {
            Arc::new(Schema::new(
                fields.iter().map(|(n, d)| Field::new(*n, d.clone(), false)).collect::<Vec<_>>(),
            ))
        };
        let n = r.order_deletes.len();
        wb.delete_table(
            orders,
            &record_batch(
                key(&[("thread", DataType::Int32), ("order", DataType::Int64)]),
                vec![
                    Arc::new(Int32Array::from(vec![t; n])),
                    Arc::new(Int64Array::from(r.order_deletes.clone())),
                ],
            )?,
        )?;
        let n = r.line_deletes.len();
        wb.delete_table(
            lines,
            &record_batch(
                key(&[("thread", DataType::Int32), ("order", DataType::Int64), ("line", DataType::Int32)]),
                vec![
                    Arc::new(Int32Array::from(vec![t; n])),
                    Arc::new(Int64Array::from(r.line_deletes.iter().map(|d| d.0).collect::<Vec<_>>())),
                    Arc::new(Int32Array::from(r.line_deletes.iter().map(|d| d.1).collect::<Vec<_>>())),
                ],
            )?,
        )?;
        wb.put(&r.kv.0, &r.kv.1);
        db.write_opt(wb, &WriteOptions::default().sync(sync))
    }

    fn model(&self, thread: u32) -> Box<dyn Model> {
        Box::new(TablesModel { seed: self.seed, thread, state: BTreeMap::new() })
    }
}

/// One thread's rows of both tables and its key, rendered as strings.
struct TablesModel {
    seed: u64,
    thread: u32,
    state: BTreeMap<String, String>,
}

/// Scans the rows of `thread` in `table`.
fn scan_thread(db: &Db, table: &str, thread: u32) -> Result<Vec<RecordBatch>, String> {
    // A writer killed before it created the tables leaves none: no rows,
    // which the model's comparison accepts only while none was
    // acknowledged.
    let Ok(t) = db.table(table) else { return Ok(Vec::new()) };
    let prefix = vec![KeyValue::I32(thread as i32)];
    let opts = ScanOptions::default().range((Bound::Included(prefix.clone()), Bound::Included(prefix)));
    let scan = t.scan(opts).map_err(|e| format!("scan of {table}: {e}"))?;
    scan.collect::<basalt::Result<Vec<_>>>().map_err(|e| format!("scan of {table}: {e}"))
}

/// What the database holds of `thread`, in model form.
fn observe(db: &Db, thread: u32) -> Result<BTreeMap<String, String>, String> {
    let mut got = BTreeMap::new();
    for b in scan_thread(db, "orders", thread)? {
        let (order, batch) =
            (b.column(1).as_primitive::<Int64Type>(), b.column(2).as_primitive::<Int64Type>());
        let (amount, note) = (b.column(3).as_primitive::<Float64Type>(), b.column(4).as_string::<i32>());
        for i in 0..b.num_rows() {
            let note = (!note.is_null(i)).then(|| note.value(i));
            got.insert(
                format!("orders/{}", order.value(i)),
                order_row(batch.value(i), amount.value(i), note),
            );
        }
    }
    for b in scan_thread(db, "lines", thread)? {
        let (order, line) =
            (b.column(1).as_primitive::<Int64Type>(), b.column(2).as_primitive::<Int32Type>());
        let (batch, qty) = (b.column(3).as_primitive::<Int64Type>(), b.column(4).as_primitive::<Int32Type>());
        for i in 0..b.num_rows() {
            got.insert(
                format!("lines/{}/{}", order.value(i), line.value(i)),
                line_row(batch.value(i), qty.value(i)),
            );
        }
    }
    let key = format!("tables/{thread:02}/last");
    if let Some(v) = db.get(&key).map_err(|e| format!("get {key}: {e}"))? {
        got.insert(format!("kv/{key}"), String::from_utf8_lossy(&v).into());
    }
    Ok(got)
}

impl Model for TablesModel {
    fn apply(&mut self, id: u64) {
        apply(&mut self.state, changes(self.seed, self.thread, id));
    }

    fn check(&self, db: &Db, pending: Option<u64>) -> Result<bool, String> {
        let got = observe(db, self.thread)?;
        let who = format!("tables thread {}", self.thread);
        let apply_pending = |state: &mut BTreeMap<_, _>, p| apply(state, changes(self.seed, self.thread, p));
        judge(&who, &got, &self.state, pending, apply_pending, |v| v.map_or("nothing".into(), Clone::clone))
    }
}
