//! Basalt's catalog as a DataFusion schema: every table of the database,
//! looked up when a query names it (so tables created later, by SQL or by
//! the engine's API, appear at once). `CREATE TABLE` and `DROP TABLE`
//! reach the engine's DDL through it.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use basalt::{Db, IndexOptions, TableOptions};
use datafusion::catalog::{MemTable, SchemaProvider, TableProvider};
use datafusion::common::{Constraint, Result, exec_err, not_impl_err, plan_err};
use datafusion::error::DataFusionError;
use datafusion::execution::context::SessionContext;

use crate::error::to_df;
use crate::insert::conform;
use crate::table::BasaltTable;

/// The catalog and schema the session's tables live in (DataFusion's
/// defaults, so unqualified names find them).
pub(crate) const CATALOG: &str = "datafusion";
pub(crate) const SCHEMA: &str = "public";

/// The database behind a session made by [`crate::session`].
pub(crate) fn database(ctx: &SessionContext) -> Result<Arc<Db>> {
    let schema = ctx.catalog(CATALOG).and_then(|c| c.schema(SCHEMA));
    let Some(basalt) = schema.as_ref().and_then(|s| s.downcast_ref::<BasaltSchema>()) else {
        return plan_err!("this session has no Basalt database: make it with basalt_datafusion::session");
    };
    Ok(basalt.db().clone())
}

/// The tables of one Basalt database.
#[derive(Debug)]
pub struct BasaltSchema {
    db: Arc<Db>,
}

impl BasaltSchema {
    /// The tables of `db`.
    pub fn new(db: Arc<Db>) -> BasaltSchema {
        BasaltSchema { db }
    }

    /// The database.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// Creates table `name` from what `CREATE TABLE` planned (a `MemTable`
    /// holding the schema, the constraints, and for `CREATE TABLE … AS` the
    /// rows): the primary key becomes the table's, each `UNIQUE` a unique
    /// index, and the rows are written. On any failure the table is dropped
    /// again, so the statement changes nothing.
    fn create(&self, name: &str, planned: &MemTable) -> Result<()> {
        let planned_schema = planned.schema();
        let mut primary_key: Option<&[usize]> = None;
        let mut unique: Vec<&[usize]> = Vec::new();
        for c in planned.constraints().map(|c| c.iter()).into_iter().flatten() {
            match c {
                Constraint::PrimaryKey(columns) => primary_key = Some(columns),
                Constraint::Unique(columns) => unique.push(columns),
            }
        }
        let Some(primary_key) = primary_key else {
            return exec_err!(
                "table {name}: a Basalt table needs a primary key, e.g. CREATE TABLE {name} (id BIGINT, …, PRIMARY KEY (id))"
            );
        };
        if let Some(f) =
            planned_schema.fields().iter().find(|f| planned.get_column_default(f.name()).is_some())
        {
            return not_impl_err!(
                "table {name}: column {} has a DEFAULT, which Basalt tables do not keep",
                f.name()
            );
        }
        let schema = stored_schema(&planned_schema);
        let names = |columns: &[usize]| -> Vec<String> {
            columns.iter().map(|&i| schema.field(i).name().clone()).collect()
        };
        let key_names = names(primary_key);
        let key_refs: Vec<&str> = key_names.iter().map(String::as_str).collect();
        let table =
            self.db.create_table(name, schema.clone(), &key_refs, TableOptions::default()).map_err(to_df)?;
        // The schema as stored: `create_table` makes the key columns
        // non-nullable.
        let schema = table.schema();
        let filled = (|| -> Result<()> {
            for columns in &unique {
                let cols = names(columns);
                let refs: Vec<&str> = cols.iter().map(String::as_str).collect();
                let index = format!("{name}_{}_key", cols.join("_"));
                table.create_index(&index, &refs, IndexOptions::default().unique(true)).map_err(to_df)?;
            }
            for partition in &planned.batches {
                let Ok(batches) = partition.try_read() else {
                    return exec_err!("table {name}: the planned rows are locked");
                };
                for batch in batches.iter() {
                    table.write(&conform(&schema, batch)?).map_err(to_df)?;
                }
            }
            Ok(())
        })();
        // The engine drops no table while a handle to it is open.
        drop(table);
        if let Err(e) = filled {
            if let Err(undo) = self.db.drop_table(name) {
                return exec_err!("{e}; and dropping the half-made table {name} failed: {undo}");
            }
            return Err(e);
        }
        Ok(())
    }
}

/// A type as a table stores it: DataFusion's view types (its default for
/// strings) as their plain forms.
pub(crate) fn stored_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

/// The schema a table is created with: view types (DataFusion's default
/// for strings) as their plain forms (`create_table` makes the key
/// columns non-nullable).
fn stored_schema(planned: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = planned
        .fields()
        .iter()
        .map(|f| Field::new(f.name(), stored_type(f.data_type()), f.is_nullable()))
        .collect();
    Arc::new(Schema::new(fields))
}

#[async_trait]
impl SchemaProvider for BasaltSchema {
    fn table_names(&self) -> Vec<String> {
        self.db.tables()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        if !self.table_exist(name) {
            return Ok(None);
        }
        Ok(Some(Arc::new(BasaltTable::try_new(self.db.clone(), name).map_err(to_df)?)))
    }

    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> Result<Option<Arc<dyn TableProvider>>> {
        if self.table_exist(&name) {
            return exec_err!("table {name} already exists");
        }
        let Some(planned) = table.downcast_ref::<MemTable>() else {
            return not_impl_err!(
                "table {name}: only CREATE TABLE adds tables to a Basalt database (not external or registered tables)"
            );
        };
        self.create(&name, planned)?;
        Ok(None)
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if !self.table_exist(name) {
            return Ok(None);
        }
        let dropped = BasaltTable::try_new(self.db.clone(), name).map_err(to_df)?;
        self.db.drop_table(name).map_err(to_df)?;
        Ok(Some(Arc::new(dropped)))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.db.tables().iter().any(|t| t == name)
    }
}
