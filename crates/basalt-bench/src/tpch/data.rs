//! The TPC-H tables, generated in memory by `tpchgen-arrow`, with their
//! primary keys and the foreign-key indexes every engine gets; and the
//! same rows written as Parquet files for the engines that read Parquet.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::compute::cast;
use datafusion::parquet::arrow::ArrowWriter;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator, PartSuppGenerator,
    RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow,
    SupplierArrow,
};

use crate::engine::Result;

/// One generated table.
pub struct Table {
    pub name: &'static str,
    /// Primary-key columns.
    pub key: &'static [&'static str],
    /// Secondary indexes on foreign keys: (name, column).
    pub indexes: &'static [(&'static str, &'static str)],
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl Table {
    pub fn rows(&self) -> u64 {
        self.batches.iter().map(|b| b.num_rows() as u64).sum()
    }
}

/// Rows per generated batch.
const BATCH_ROWS: usize = 8192;

/// Every table at scale factor `sf`.
pub fn generate(sf: f64) -> Result<Vec<Table>> {
    let out = vec![
        table(
            "region",
            &["r_regionkey"],
            &[],
            RegionArrow::new(RegionGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS),
        )?,
        table(
            "nation",
            &["n_nationkey"],
            &[],
            NationArrow::new(NationGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS),
        )?,
        table(
            "supplier",
            &["s_suppkey"],
            &[],
            SupplierArrow::new(SupplierGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS),
        )?,
        table(
            "customer",
            &["c_custkey"],
            &[],
            CustomerArrow::new(CustomerGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS),
        )?,
        table(
            "part",
            &["p_partkey"],
            &[],
            PartArrow::new(PartGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS),
        )?,
        table(
            "partsupp",
            &["ps_partkey", "ps_suppkey"],
            &[("partsupp_suppkey", "ps_suppkey")],
            PartSuppArrow::new(PartSuppGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS),
        )?,
        table(
            "orders",
            &["o_orderkey"],
            &[("orders_custkey", "o_custkey")],
            OrderArrow::new(OrderGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS),
        )?,
        table(
            "lineitem",
            &["l_orderkey", "l_linenumber"],
            &[("lineitem_partkey", "l_partkey")],
            LineItemArrow::new(LineItemGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS),
        )?,
    ];
    for t in &out {
        if t.batches.is_empty() {
            return Err(format!("tpchgen made no rows of {}", t.name).into());
        }
    }
    Ok(out)
}

fn table(
    name: &'static str,
    key: &'static [&'static str],
    indexes: &'static [(&'static str, &'static str)],
    batches: impl Iterator<Item = std::result::Result<RecordBatch, arrow_schema::ArrowError>>,
) -> Result<Table> {
    let batches = batches.map(|b| plain(&b?)).collect::<Result<Vec<RecordBatch>>>()?;
    let schema = batches.first().map_or_else(|| Arc::new(Schema::empty()), RecordBatch::schema);
    Ok(Table { name, key, indexes, schema, batches })
}

/// `batch` with its `Utf8View` columns as `Utf8`, the string type every
/// engine here stores (Basalt's tables, SQLite's text, Parquet's).
fn plain(batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (f, c) in schema.fields().iter().zip(batch.columns()) {
        if f.data_type() == &DataType::Utf8View {
            fields.push(Field::new(f.name(), DataType::Utf8, f.is_nullable()));
            columns.push(cast(c.as_ref(), &DataType::Utf8)?);
        } else {
            fields.push(f.as_ref().clone());
            columns.push(c.clone());
        }
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

/// Each table as `<dir>/<name>.parquet` (the Parquet writer's defaults:
/// uncompressed pages with statistics, row groups of up to 1M rows).
pub fn write_parquet(tables: &[Table], dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for t in tables {
        let file = std::fs::File::create(dir.join(format!("{}.parquet", t.name)))?;
        let mut writer = ArrowWriter::try_new(file, t.schema.clone(), None)?;
        for b in &t.batches {
            writer.write(b)?;
        }
        writer.close()?;
    }
    Ok(())
}

/// The value of row `i` of `column` for SQLite.
pub fn sqlite_value(column: &dyn Array, i: usize) -> rusqlite::types::Value {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Date32Type, Decimal128Type, Int32Type, Int64Type};
    use rusqlite::types::Value;
    if column.is_null(i) {
        return Value::Null;
    }
    match column.data_type() {
        DataType::Int32 => Value::Integer(column.as_primitive::<Int32Type>().value(i).into()),
        DataType::Int64 => Value::Integer(column.as_primitive::<Int64Type>().value(i)),
        DataType::Decimal128(_, scale) => {
            let v = column.as_primitive::<Decimal128Type>().value(i);
            Value::Real(v as f64 / 10f64.powi(i32::from(*scale)))
        }
        DataType::Date32 => {
            let days = column.as_primitive::<Date32Type>().value(i);
            let date = arrow_array::temporal_conversions::date32_to_datetime(days).map(|d| d.date());
            Value::Text(date.map_or_else(String::new, |d| d.to_string()))
        }
        DataType::Utf8 => Value::Text(column.as_string::<i32>().value(i).to_string()),
        other => Value::Text(format!("unsupported type {other}")),
    }
}

/// SQLite's column type for an Arrow type.
pub fn sqlite_type(t: &DataType) -> &'static str {
    match t {
        DataType::Int32 | DataType::Int64 => "INTEGER",
        DataType::Decimal128(_, _) | DataType::Float64 => "REAL",
        _ => "TEXT",
    }
}
