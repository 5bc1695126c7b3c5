//! What a `Table` or `Keyspace` handle is: the database's shared state and
//! its tree's, kept here, below every room that reads or writes through a
//! handle; their public methods are `handles/`'s (and the rooms' that a
//! method's work belongs to).

use std::sync::Arc;

use super::inner::DbInner;
use super::open_trees::TreeShared;

/// A handle to one table. Cheap to clone; `Send + Sync`.
///
/// Rows in and out as Arrow record batches: upserts, point reads, scans
/// with a filter, a secondary index, and a bulk load:
///
/// ```
/// use std::sync::Arc;
/// use basalt::arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
/// use basalt::arrow_schema::{DataType, Field, Schema};
/// use basalt::{CmpOp, Db, Filter, IndexOptions, IndexPredicate, KeyValue, LookupOptions, Options,
///              Predicate, ScanOptions, TableOptions};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("id", DataType::Int64, false),
///     Field::new("city", DataType::Utf8, true),
/// ]));
/// let users = db.create_table("users", schema.clone(), &["id"], TableOptions::default())?;
/// let rows = |ids: Vec<i64>, cities: Vec<&str>| {
///     let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(cities))];
///     RecordBatch::try_new(schema.clone(), columns)
/// };
/// users.write(&rows(vec![1, 2, 3], vec!["Oslo", "Lima", "Oslo"])?)?; // one atomic upsert
///
/// let row = users.get(&[KeyValue::I64(2)])?.expect("row 2 is there");
/// assert_eq!(row.num_rows(), 1);
///
/// let oslo = Predicate::new("city", CmpOp::Eq, Arc::new(StringArray::from(vec!["Oslo"])));
/// let mut found = 0;
/// for batch in users.scan(ScanOptions::default().filter(Some(Filter::all(vec![oslo]))))? {
///     found += batch?.num_rows();
/// }
/// assert_eq!(found, 2);
///
/// // An index, kept in step with every write from now on.
/// users.create_index("by_city", &["city"], IndexOptions::default())?;
/// let in_lima = IndexPredicate::Eq(vec![Some(KeyValue::Str("Lima"))]);
/// assert_eq!(users.lookup("by_city", in_lima, LookupOptions::default())?.num_rows(), 1);
///
/// // Many rows, in any key order, straight into the engine's files.
/// let logs = db.create_table("logs", schema.clone(), &["id"], TableOptions::default())?;
/// let loaded = logs.bulk_load([rows(vec![20, 10], vec!["b", "a"])?])?;
/// assert_eq!(loaded.rows, 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<DbInner>,
    pub(crate) shared: Arc<TreeShared>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.shared.name)
            .field("id", &self.shared.id)
            .finish_non_exhaustive()
    }
}

/// A handle to one keyspace. Cheap to clone; `Send + Sync`. While a handle
/// (or an iterator from it) is alive, the keyspace cannot be dropped.
#[derive(Clone)]
pub struct Keyspace {
    pub(crate) inner: Arc<DbInner>,
    pub(crate) shared: Arc<TreeShared>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace").field("name", &self.shared.name).finish_non_exhaustive()
    }
}
