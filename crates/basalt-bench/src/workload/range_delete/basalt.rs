//! Basalt's stores: table `t` keyed by `id`, default options but the
//! shared block cache; writes by `Table::write_opt` without sync (as every
//! adapter writes). The range is deleted by one `Table::delete_range_opt`
//! (sync=false), or, in the row-by-row store, by `Table::delete` of its
//! keys, [`DELETE_BATCH_ROWS`] a call (each one write, without sync).
//! Counts by `Table::count_rows`, gets by `Table::get_with` (a row view),
//! scans by `Table::scan` of every column; compaction is `Db::flush` and
//! `Table::compact`.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{ArrayRef, BinaryArray, Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{Db, KeyValue, KeyValueRange, Options, ScanOptions, Table, TableOptions, WriteOptions};

use super::{DELETE_BATCH_ROWS, PAYLOAD_BYTES, RangeStore, Rec, RowView, TombstoneStats};
use crate::engine::{Config, Result};

/// The settings, for the report.
pub fn options(cfg: &Config, rows: bool) -> String {
    format!(
        "table t (id Int64 key, qty Int64, price Float64, payload Binary({PAYLOAD_BYTES})); default options but \
         the block cache ({} MiB); Table::write_opt per load batch (sync=false); {}; Table::count_rows, \
         Table::get_with, Table::scan; settle: Db::flush + wait_for_background_work; compaction: Db::flush + \
         Table::compact",
        cfg.cache_bytes >> 20,
        if rows {
            format!("delete: Table::delete of the range's keys, {DELETE_BATCH_ROWS} a call (sync=false)")
        } else {
            "delete: one Table::delete_range_opt (sync=false)".to_string()
        }
    )
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("qty", DataType::Int64, false),
        Field::new("price", DataType::Float64, false),
        Field::new("payload", DataType::Binary, false),
    ]))
}

fn range(lo: i64, hi: i64) -> KeyValueRange<'static> {
    (Bound::Included(vec![KeyValue::I64(lo)]), Bound::Excluded(vec![KeyValue::I64(hi)]))
}

pub struct BasaltStore {
    db: Db,
    table: Table,
    schema: SchemaRef,
    /// The key column's schema, for `Table::delete`.
    keys: SchemaRef,
    /// Delete row by row instead of by range.
    rows: bool,
}

impl BasaltStore {
    pub fn open(dir: &Path, cfg: &Config, rows: bool) -> Result<BasaltStore> {
        let db = Db::open(dir, Options::default().block_cache_bytes(cfg.cache_bytes))?;
        let schema = schema();
        let table = db.create_table("t", schema.clone(), &["id"], TableOptions::default())?;
        let keys = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        Ok(BasaltStore { db, table, schema, keys, rows })
    }

    fn wait(&self) -> Result<()> {
        self.db.wait_for_background_work()?;
        Ok(self.db.sync_wal()?)
    }
}

/// A row view's columns.
fn view(row: basalt::RowRef<'_>) -> basalt::Result<RowView<'_>> {
    let missing = |c: usize| basalt::Error::InvalidArgument(format!("column {c} is null"));
    Ok(RowView {
        id: row.i64(0)?.ok_or_else(|| missing(0))?,
        qty: row.i64(1)?.ok_or_else(|| missing(1))?,
        price: row.f64(2)?.ok_or_else(|| missing(2))?,
        payload: row.bytes(3)?.ok_or_else(|| missing(3))?,
    })
}

impl RangeStore for BasaltStore {
    fn load(&mut self, rows: &[Rec]) -> Result<()> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.qty))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.price))),
            Arc::new(BinaryArray::from_iter_values(rows.iter().map(|r| r.payload.as_slice()))),
        ];
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        Ok(self.table.write_opt(&batch, &WriteOptions::default().sync(false))?)
    }

    fn settle(&mut self) -> Result<()> {
        self.db.flush()?;
        self.wait()
    }

    fn delete(&mut self, lo: i64, hi: i64) -> Result<()> {
        if !self.rows {
            return Ok(self.table.delete_range_opt(range(lo, hi), &WriteOptions::default().sync(false))?);
        }
        let mut start = lo;
        while start < hi {
            let end = (start + DELETE_BATCH_ROWS as i64).min(hi);
            let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(start..end));
            self.table.delete(&RecordBatch::try_new(self.keys.clone(), vec![ids])?)?;
            start = end;
        }
        Ok(())
    }

    fn count(&mut self, lo: i64, hi: i64) -> Result<u64> {
        Ok(self.table.count_rows(&range(lo, hi), None)?)
    }

    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
        match self.table.get_with(&[KeyValue::I64(id)], |row| view(row).map(&mut *visit))? {
            Some(done) => done.map(|()| true).map_err(Into::into),
            None => Ok(false),
        }
    }

    fn scan(&mut self, lo: i64, hi: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<u64> {
        let mut rows = 0;
        for batch in self.table.scan(ScanOptions::default().range(range(lo, hi)))? {
            let batch = batch?;
            let id = batch.column(0).as_primitive::<Int64Type>();
            let qty = batch.column(1).as_primitive::<Int64Type>();
            let price = batch.column(2).as_primitive::<Float64Type>();
            let payload = batch.column(3).as_binary::<i32>();
            for i in 0..batch.num_rows() {
                visit(RowView {
                    id: id.value(i),
                    qty: qty.value(i),
                    price: price.value(i),
                    payload: payload.value(i),
                });
            }
            rows += batch.num_rows() as u64;
        }
        Ok(rows)
    }

    fn compact(&mut self) -> Result<()> {
        self.db.flush()?;
        self.table.compact()?;
        self.wait()
    }

    fn tombstones(&self) -> Option<TombstoneStats> {
        let s = self.db.stats();
        Some(TombstoneStats {
            files_dropped: s.files_dropped_by_range_deletes,
            range_tombstones: s.range_tombstones,
        })
    }
}
