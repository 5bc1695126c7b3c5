//! Basalt's history store: table `t` keyed by `id`, default options but
//! the shared block cache; writes by `Table::write_opt` without sync (as
//! every adapter writes), gets by `Table::get_with` (a row view, no Arrow
//! arrays); history by `Table::set_history`, reads as of a point by
//! `Db::snapshot_at(AsOf::Seqno)` and `Table::get_with_opt`, a key's
//! history by `Table::history`, the feed by `Table::changes`.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::{Array, ArrayRef, BinaryArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{
    AsOf, CHANGE_OP, Db, HISTORY_DELETED, HISTORY_SEQNO, HistoryOptions, HistoryWindow, KeyValue, Options,
    ReadOptions, Snapshot, Table, TableOptions, WriteOptions,
};

use super::{FIELDS, HistoryStore, Rec, RowView, Visit, WINDOW};
use crate::engine::{Config, Result};

/// The settings, for the report.
pub fn options(cfg: &Config) -> String {
    format!(
        "table t (id Int64 key, version Int64, {FIELDS} Binary fields); default options but the block cache \
         ({} MiB); Table::write_opt per update (sync=false), Table::get_with; history on: \
         Table::set_history(HistoryWindow::duration({} h)) after the load; as of: Db::snapshot_at(AsOf::Seqno) \
         + Table::get_with_opt; Table::history; Table::changes; compaction: Db::flush + Table::compact",
        cfg.cache_bytes >> 20,
        WINDOW.as_secs() / 3600
    )
}

fn schema() -> SchemaRef {
    let mut fields =
        vec![Field::new("id", DataType::Int64, false), Field::new("version", DataType::Int64, false)];
    fields.extend((0..FIELDS).map(|f| Field::new(format!("field{f}"), DataType::Binary, false)));
    Arc::new(Schema::new(fields))
}

pub struct BasaltStore {
    db: Db,
    table: Table,
    schema: SchemaRef,
    /// The snapshot as-of reads go through.
    as_of: Option<Snapshot>,
}

impl BasaltStore {
    pub fn open(dir: &Path, cfg: &Config) -> Result<BasaltStore> {
        let db = Db::open(dir, Options::default().block_cache_bytes(cfg.cache_bytes))?;
        let schema = schema();
        let table = db.create_table("t", schema.clone(), &["id"], TableOptions::default())?;
        Ok(BasaltStore { db, table, schema, as_of: None })
    }

    fn write(&self, rows: &[Rec]) -> Result<()> {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.version))),
        ];
        for f in 0..FIELDS {
            columns
                .push(Arc::new(BinaryArray::from_iter_values(rows.iter().map(|r| r.fields[f].as_slice()))));
        }
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        Ok(self.table.write_opt(&batch, &WriteOptions::default().sync(false))?)
    }
}

/// A row view's version and fields (columns 1 and 2…).
fn view(row: basalt::RowRef<'_>) -> basalt::Result<RowView<'_>> {
    let missing = |c: usize| basalt::Error::InvalidArgument(format!("column {c} is null"));
    let version = row.i64(1)?.ok_or_else(|| missing(1))?;
    let mut fields = [&[][..]; FIELDS];
    for (f, out) in fields.iter_mut().enumerate() {
        *out = row.bytes(2 + f)?.ok_or_else(|| missing(2 + f))?;
    }
    Ok(RowView { version, fields })
}

/// Hands each row of a history or change batch to `visit`, with its
/// `_seqno` and whether it is a delete.
fn visit_batch(batch: &RecordBatch, deleted: &dyn Fn(usize) -> bool, visit: &mut Visit<'_>) -> Result<usize> {
    let column = |name: &str| -> Result<&ArrayRef> {
        batch.column_by_name(name).ok_or_else(|| format!("history: no column {name}").into())
    };
    let seqno = column(HISTORY_SEQNO)?.as_primitive::<UInt64Type>();
    let id = column("id")?.as_primitive::<Int64Type>();
    let version = column("version")?.as_primitive::<Int64Type>();
    let fields: Vec<&BinaryArray> = (0..FIELDS)
        .map(|f| column(&format!("field{f}")).map(AsArray::as_binary::<i32>))
        .collect::<Result<_>>()?;
    for i in 0..batch.num_rows() {
        let row = (!deleted(i) && version.is_valid(i)).then(|| RowView {
            version: version.value(i),
            fields: std::array::from_fn(|f| fields[f].value(i)),
        });
        visit(seqno.value(i), id.value(i), row);
    }
    Ok(batch.num_rows())
}

impl HistoryStore for BasaltStore {
    fn load(&mut self, rows: &[Rec]) -> Result<()> {
        self.write(rows)
    }

    fn settle(&mut self) -> Result<()> {
        self.db.flush()?;
        self.db.wait_for_background_work()?;
        Ok(self.db.sync_wal()?)
    }

    fn keep_history(&mut self) -> Result<u64> {
        self.table.set_history(HistoryWindow::duration(WINDOW))?;
        self.point()
    }

    fn update(&mut self, rec: &Rec) -> Result<()> {
        self.write(std::slice::from_ref(rec))
    }

    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
        match self.table.get_with(&[KeyValue::I64(id)], |row| view(row).map(&mut *visit))? {
            Some(done) => done.map(|()| true).map_err(Into::into),
            None => Ok(false),
        }
    }

    fn point(&mut self) -> Result<u64> {
        Ok(self.db.snapshot().seqno())
    }

    fn read_as_of(&mut self, point: u64) -> Result<u64> {
        self.as_of = None;
        let snapshot = self.db.snapshot_at(AsOf::Seqno(point))?;
        let at = snapshot.seqno();
        self.as_of = Some(snapshot);
        Ok(at)
    }

    fn get_as_of(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
        let opts = ReadOptions::default().snapshot(self.as_of.as_ref());
        match self.table.get_with_opt(&[KeyValue::I64(id)], &opts, |row| view(row).map(&mut *visit))? {
            Some(done) => done.map(|()| true).map_err(Into::into),
            None => Ok(false),
        }
    }

    fn history(&mut self, id: i64, visit: &mut Visit<'_>) -> Result<usize> {
        let batch = self.table.history(&[KeyValue::I64(id)], HistoryOptions::default())?;
        let deleted =
            batch.column_by_name(HISTORY_DELETED).ok_or("history: no _deleted column")?.as_boolean().clone();
        visit_batch(&batch, &|i| deleted.value(i), visit)
    }

    fn changes(&mut self, since: u64, limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        let batch = self.table.changes(since, limit)?;
        let op = batch.column_by_name(CHANGE_OP).ok_or("history: no _op column")?.as_string::<i32>().clone();
        visit_batch(&batch, &|i| op.value(i) == "delete", visit)
    }

    fn compact(&mut self) -> Result<()> {
        self.db.flush()?;
        self.table.compact()?;
        self.db.wait_for_background_work()?;
        Ok(self.db.sync_wal()?)
    }
}
