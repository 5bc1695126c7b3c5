//! What the SQL test binaries share: a database in a temporary directory
//! with its session, statements run to their batches, rows as text.

use std::sync::Arc;

use arrow_array::RecordBatch;
use basalt::{Db, Options};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::execution::context::SessionContext;

/// A session over a new database in a temporary directory.
pub fn open() -> (tempfile::TempDir, Arc<Db>, SessionContext) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = Arc::new(Db::open(dir.path().join("db"), Options::default()).expect("open"));
    let ctx = basalt_datafusion::session(db.clone());
    (dir, db, ctx)
}

/// Runs `query` through `basalt_datafusion::sql` to its batches.
pub async fn run(ctx: &SessionContext, query: &str) -> Vec<RecordBatch> {
    let df = basalt_datafusion::sql(ctx, query).await.unwrap_or_else(|e| panic!("{query}: {e}"));
    df.collect().await.unwrap_or_else(|e| panic!("{query}: {e}"))
}

/// Rows as text, one string per row, values separated by `|`.
pub fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for b in batches {
        let formatters: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).expect("formatter"))
            .collect();
        for r in 0..b.num_rows() {
            out.push(formatters.iter().map(|f| f.value(r).to_string()).collect::<Vec<_>>().join("|"));
        }
    }
    out
}
