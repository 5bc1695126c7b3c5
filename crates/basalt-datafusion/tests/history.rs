//! SQL as of a past point: `as_of('t', seqno | time)` read like the table
//! (filters, indexes, aggregates, prepared statements), refused where the
//! window does not hold the point, and read-only.

mod common;

use std::time::Duration;

use common::{open, rows, run};
use datafusion::scalar::ScalarValue;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_of_reads_the_table_at_a_past_seqno_or_time() {
    let (_dir, db, ctx) = open();
    run(&ctx, "CREATE TABLE t (id BIGINT PRIMARY KEY, city TEXT, n BIGINT)").await;
    run(&ctx, "CREATE INDEX by_city ON t (city)").await;
    run(&ctx, "ALTER TABLE t SET (history = INTERVAL '1' HOUR)").await;
    run(&ctx, "INSERT INTO t VALUES (1, 'Oslo', 10), (2, 'Lima', 20)").await;
    let first = db.snapshot().seqno();
    std::thread::sleep(Duration::from_millis(5));
    let between = chrono::Utc::now().to_rfc3339();
    std::thread::sleep(Duration::from_millis(5));
    run(&ctx, "UPDATE t SET city = 'Lima' WHERE id = 1").await;
    run(&ctx, "DELETE FROM t WHERE id = 2").await;
    db.table("t").expect("t").compact().expect("compact");

    let now = rows(&run(&ctx, "SELECT id, city FROM t ORDER BY id").await);
    assert_eq!(now, vec!["1|Lima"]);
    for point in [first.to_string(), format!("'{between}'"), format!("TIMESTAMP '{between}'")] {
        let then = run(&ctx, &format!("SELECT id, city FROM as_of('t', {point}) ORDER BY id")).await;
        assert_eq!(rows(&then), vec!["1|Oslo", "2|Lima"], "as of {point}");
        // Through the index, and an aggregate, at the same point.
        let by_city = run(&ctx, &format!("SELECT id FROM as_of('t', {point}) WHERE city = 'Lima'")).await;
        assert_eq!(rows(&by_city), vec!["2"], "index as of {point}");
        let sum = run(&ctx, &format!("SELECT count(*), sum(n) FROM as_of('t', {point})")).await;
        assert_eq!(rows(&sum), vec!["2|30"], "aggregate as of {point}");
    }
    // Prepared, with the table function's point fixed in the text.
    let text = format!("SELECT city FROM as_of('t', {first}) WHERE id = $1");
    for _ in 0..2 {
        let out = basalt_datafusion::query(&ctx, &text, &[ScalarValue::Int64(Some(2))]).await.expect("query");
        assert_eq!(rows(&out.batches), vec!["Lima"]);
    }
    // Joined with the present.
    let moved = run(
        &ctx,
        &format!("SELECT o.id, o.city, n.city FROM as_of('t', {first}) o JOIN t n ON o.id = n.id WHERE o.city <> n.city"),
    )
    .await;
    assert_eq!(rows(&moved), vec!["1|Oslo|Lima"]);
    // Read-only, and refused where no window holds the point.
    let write =
        basalt_datafusion::sql(&ctx, &format!("INSERT INTO as_of('t', {first}) VALUES (3, 'x', 1)")).await;
    let failed = match write {
        Err(e) => Some(e.to_string()),
        Ok(df) => df.collect().await.err().map(|e| e.to_string()),
    };
    assert!(failed.is_some(), "a write through as_of");
    run(&ctx, "CREATE TABLE plain (id BIGINT PRIMARY KEY)").await;
    run(&ctx, "INSERT INTO plain VALUES (1)").await;
    run(&ctx, "INSERT INTO plain VALUES (2)").await;
    let old = basalt_datafusion::sql(&ctx, &format!("SELECT * FROM as_of('plain', {first})")).await;
    let err = match old {
        Err(e) => e.to_string(),
        Ok(df) => df.collect().await.expect_err("plain keeps no history").to_string(),
    };
    assert!(err.contains("history"), "{err}");
}

/// `ALTER TABLE t SET (ttl = …)`: rows older than it vanish from every
/// query at once (scans, the index path, counts), by a manual clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_set_through_sql_expires_rows_from_every_query() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = std::sync::Arc::new(basalt::clock::ManualClock::new(1_800_000_000_000));
    let opts = basalt::Options::default().clock(clock.clone());
    let db = std::sync::Arc::new(basalt::Db::open(dir.path().join("db"), opts).expect("open"));
    let ctx = basalt_datafusion::session(db.clone());
    run(&ctx, "CREATE TABLE t (id BIGINT PRIMARY KEY, city TEXT)").await;
    run(&ctx, "CREATE INDEX by_city ON t (city)").await;
    run(&ctx, "ALTER TABLE t SET (ttl = INTERVAL '1' HOUR)").await;
    assert_eq!(db.table("t").expect("t").ttl(), Some(Duration::from_hours(1)));
    run(&ctx, "INSERT INTO t VALUES (1, 'Oslo'), (2, 'Lima')").await;
    clock.advance(1_800_000);
    run(&ctx, "INSERT INTO t VALUES (3, 'Oslo')").await;
    clock.advance(1_800_000);
    assert_eq!(rows(&run(&ctx, "SELECT id FROM t ORDER BY id").await), vec!["3"]);
    assert_eq!(rows(&run(&ctx, "SELECT id FROM t WHERE city = 'Oslo'").await), vec!["3"]);
    assert_eq!(rows(&run(&ctx, "SELECT count(*) FROM t").await), vec!["1"]);
    assert_eq!(rows(&run(&ctx, "SELECT id FROM t WHERE id = 1").await), Vec::<String>::new());
    run(&ctx, "ALTER TABLE t SET (ttl = 'off')").await;
    assert_eq!(db.table("t").expect("t").ttl(), None);
    clock.advance(100_000_000);
    assert_eq!(rows(&run(&ctx, "SELECT id FROM t").await), vec!["3"]);
}
