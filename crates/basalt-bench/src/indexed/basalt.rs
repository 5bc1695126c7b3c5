//! Basalt's indexed store: one table `rec` keyed by `id`, the indexes
//! the set asks for (`Table::create_index` before the load, so every
//! insert keeps them), queries by `Table::lookup_with` (rows as views, no Arrow
//! arrays, as SQLite's adapter reads borrowed columns) and `Table::count`;
//! gets by `Table::get_with`.
//! With no index, queries are `Table::scan` with a `Filter` (Basalt's own
//! scan-and-filter, the baseline).

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{
    CmpOp, Db, Filter, IndexOptions, IndexPredicate, KeyValue, LookupOptions, Options, Predicate,
    ScanOptions, Table, TableOptions,
};

use super::{IndexSet, IndexedStore, Query, Rec, RowRef};
use crate::engine::{Config, Result};

pub const OPTIONS: &str = "default options but the shared block cache; table rec keyed by id; indexes \
                           by_score (score), by_name (name) include (score), by_region (region, score); lookups \
                           by Table::lookup_with and gets by Table::get_with (row views), counts by Table::count; without indexes Table::scan with a Filter";

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("score", DataType::Int64, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("payload", DataType::Binary, false),
    ]))
}

pub struct BasaltStore {
    db: Db,
    table: Table,
    indexes: IndexSet,
}

impl BasaltStore {
    pub fn open(dir: &Path, cfg: &Config, indexes: IndexSet) -> Result<BasaltStore> {
        let db = Db::open(dir, Options::default().block_cache_bytes(cfg.cache_bytes))?;
        let table = db.create_table("rec", schema(), &["id"], TableOptions::default())?;
        if indexes.score {
            table.create_index("by_score", &["score"], IndexOptions::default())?;
        }
        if indexes.name {
            table.create_index(
                "by_name",
                &["name"],
                IndexOptions::default().include(vec!["score".into()]),
            )?;
        }
        if indexes.region {
            table.create_index("by_region", &["region", "score"], IndexOptions::default())?;
        }
        Ok(BasaltStore { db, table, indexes })
    }

    /// The index and predicate answering `q`, or `None` without one.
    fn index_for<'q>(&self, q: &'q Query) -> Option<(&'static str, IndexPredicate<'q>)> {
        let one = |v| vec![Some(v)];
        match q {
            Query::ScoreEq(v) if self.indexes.score => {
                Some(("by_score", IndexPredicate::Eq(one(KeyValue::I64(*v)))))
            }
            Query::ScoreRange(lo, hi) if self.indexes.score => Some((
                "by_score",
                IndexPredicate::Range(
                    Bound::Included(one(KeyValue::I64(*lo))),
                    Bound::Excluded(one(KeyValue::I64(*hi))),
                ),
            )),
            Query::NameEq(v) if self.indexes.name => {
                Some(("by_name", IndexPredicate::Eq(one(KeyValue::Str(v)))))
            }
            Query::RegionEq(v) if self.indexes.region => {
                Some(("by_region", IndexPredicate::Prefix(one(KeyValue::Str(v)))))
            }
            _ => None,
        }
    }

    /// The filter of `q` for a scan.
    fn filter(q: &Query) -> Filter {
        let int = |v: i64| Arc::new(Int64Array::from(vec![v])) as ArrayRef;
        let string = |v: &str| Arc::new(StringArray::from(vec![v])) as ArrayRef;
        Filter::all(match q {
            Query::ScoreEq(v) => vec![Predicate::new("score", CmpOp::Eq, int(*v))],
            Query::ScoreRange(lo, hi) => vec![
                Predicate::new("score", CmpOp::GtEq, int(*lo)),
                Predicate::new("score", CmpOp::Lt, int(*hi)),
            ],
            Query::NameEq(v) => vec![Predicate::new("name", CmpOp::Eq, string(v))],
            Query::RegionEq(v) => vec![Predicate::new("region", CmpOp::Eq, string(v))],
        })
    }
}

/// The columns a query returns.
fn projection(q: &Query, covering: bool) -> Option<Vec<String>> {
    let cols: &[&str] = match (covering, q) {
        (false, _) => return None,
        (true, Query::RegionEq(_)) => &["id", "region", "score"],
        (true, Query::NameEq(_)) => &["id", "name", "score"],
        (true, _) => &["id", "score"],
    };
    Some(cols.iter().map(|c| (*c).to_string()).collect())
}

fn visit_batch(batch: &RecordBatch, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<usize> {
    let int = |name: &str| -> Result<_> {
        Ok(batch.column_by_name(name).ok_or_else(|| format!("no column {name}"))?.as_primitive::<Int64Type>())
    };
    let (id, score) = (int("id")?, int("score")?);
    let name = batch.column_by_name("name").map(AsArray::as_string::<i32>);
    let region = batch.column_by_name("region").map(AsArray::as_string::<i32>);
    let payload = batch.column_by_name("payload").map(AsArray::as_binary::<i32>);
    for i in 0..batch.num_rows() {
        visit(RowRef {
            id: id.value(i),
            score: score.value(i),
            name: name.map(|a| a.value(i)),
            region: region.map(|a| a.value(i)),
            payload: payload.map(|a| a.value(i)),
        });
    }
    Ok(batch.num_rows())
}

/// Which of `name`, `region` and `payload` a query reads: all of them,
/// or those of a covering lookup's projection (worked out once per query).
fn wanted(projection: Option<&[String]>) -> [bool; 3] {
    let read = |name: &str| projection.is_none_or(|w| w.iter().any(|c| c == name));
    [read("name"), read("region"), read("payload")]
}

/// Hands `visit` a row view's values: `id` and `score` always, the other
/// columns where `wanted` (see [`wanted`]).
fn visit_view(
    row: basalt::RowRef<'_>,
    [name, region, payload]: [bool; 3],
    visit: &mut dyn FnMut(RowRef<'_>),
) -> basalt::Result<()> {
    let int = |c: usize| -> basalt::Result<i64> {
        row.i64(c)?.ok_or_else(|| basalt::Error::InvalidArgument(format!("column {c} is null")))
    };
    visit(RowRef {
        id: int(0)?,
        score: int(2)?,
        name: if name { row.str(1)? } else { None },
        region: if region { row.str(3)? } else { None },
        payload: if payload { row.bytes(4)? } else { None },
    });
    Ok(())
}

impl IndexedStore for BasaltStore {
    fn insert(&self, recs: &[Rec]) -> Result<()> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(recs.iter().map(|r| r.id))),
            Arc::new(StringArray::from_iter_values(recs.iter().map(|r| r.name.as_str()))),
            Arc::new(Int64Array::from_iter_values(recs.iter().map(|r| r.score))),
            Arc::new(StringArray::from_iter_values(recs.iter().map(|r| r.region.as_str()))),
            Arc::new(BinaryArray::from_iter_values(recs.iter().map(|r| r.payload.as_slice()))),
        ];
        self.table.write(&RecordBatch::try_new(schema(), columns)?)?;
        Ok(())
    }

    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        self.db.wait_for_background_work()?;
        Ok(self.db.sync_wal()?)
    }

    fn begin_reads(&mut self) -> Result<()> {
        Ok(())
    }

    fn end_reads(&mut self) -> Result<()> {
        Ok(())
    }

    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<bool> {
        // A row view: the fastest form Basalt offers, as SQLite's adapter
        // reads borrowed columns.
        match self.table.get_with(&[KeyValue::I64(id)], |row| visit_view(row, [true; 3], visit))? {
            Some(done) => done.map(|()| true).map_err(Into::into),
            None => Ok(false),
        }
    }

    fn query(&mut self, q: &Query, covering: bool, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<usize> {
        let projection = projection(q, covering);
        if let Some((index, predicate)) = self.index_for(q) {
            let read = wanted(projection.as_deref());
            let opts = LookupOptions::default().projection(projection);
            let n = self.table.lookup_with(index, predicate, opts, |row| visit_view(row, read, visit))?;
            return Ok(n);
        }
        let scan =
            self.table.scan(ScanOptions::default().filter(Some(Self::filter(q))).projection(projection))?;
        let mut n = 0;
        for batch in scan {
            n += visit_batch(&batch?, visit)?;
        }
        Ok(n)
    }

    fn count(&mut self, q: &Query) -> Result<u64> {
        if let Some((index, predicate)) = self.index_for(q) {
            return Ok(self.table.count(index, predicate)?);
        }
        let opts = ScanOptions::default().filter(Some(Self::filter(q))).projection(Some(vec!["id".into()]));
        let mut n = 0u64;
        for batch in self.table.scan(opts)? {
            n += batch?.num_rows() as u64;
        }
        Ok(n)
    }

    fn rows_read(&self) -> Option<u64> {
        let s = self.db.stats();
        Some(s.index_entries_read + s.table_rows_read)
    }
}
