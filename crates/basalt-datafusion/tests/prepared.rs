//! Prepared statements, the plan cache and the direct path: each answer
//! checked against the same statement with its values written in, run
//! through DataFusion's plan.

mod common;

use std::sync::Arc;

use arrow_array::{Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::{Db, IndexOptions, TableOptions};
use common::{open, run};
use datafusion::common::ScalarValue;
use datafusion::execution::context::SessionContext;

/// Rows as sorted text.
fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut rows = common::rows(batches);
    rows.sort();
    rows
}

async fn planned(ctx: &SessionContext, text: &str) -> Vec<String> {
    rows(&run(ctx, text).await)
}

/// `kv (id BIGINT key, v INT, tag VARCHAR)` indexed on `tag`, its rows
/// spread over an SST, the memtable, overwrites and deletes.
async fn filled(ctx: &SessionContext, db: &Db) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int32, true),
        Field::new("tag", DataType::Utf8, true),
    ]));
    let table = db.create_table("kv", schema.clone(), &["id"], TableOptions::default()).expect("create");
    table.create_index("by_tag", &["tag"], IndexOptions::default()).expect("index");
    let batch = |ids: Vec<i64>, salt: i32| {
        let v: Int32Array = ids.iter().map(|&i| (i % 7 != 3).then_some(i as i32 * salt)).collect();
        let tag: StringArray = ids.iter().map(|&i| Some(format!("t{}", i % 50))).collect();
        RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(ids)), Arc::new(v), Arc::new(tag)],
        )
        .expect("batch")
    };
    table.write(&batch((0..2000).collect(), 1)).expect("write");
    db.flush().expect("flush");
    table.write(&batch((0..2000).step_by(3).collect(), -1)).expect("overwrite");
    basalt_datafusion::sql(ctx, "DELETE FROM kv WHERE id % 11 = 0")
        .await
        .expect("delete")
        .collect()
        .await
        .expect("delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_and_index_queries_take_the_direct_path_and_agree_with_the_plan() {
    let (_dir, db, ctx) = open();
    filled(&ctx, &db).await;
    let cases: [(&str, &str, usize); 10] = [
        ("SELECT count(*) FROM kv", "direct", 0),
        ("SELECT count(1) AS n FROM kv", "direct", 0),
        ("SELECT count(v) FROM kv", "DataFusion", 0),
        ("SELECT v, tag FROM kv WHERE id = $1", "direct", 1),
        ("SELECT id AS key, v FROM kv WHERE id BETWEEN $1 AND $2", "direct", 2),
        ("SELECT id, v FROM kv WHERE $1 <= id AND id < $2 AND v > 0", "direct", 2),
        ("SELECT id, v FROM kv WHERE tag = $1", "direct", 1),
        ("SELECT id FROM kv WHERE tag = $1 AND id > $2 LIMIT 3", "direct", 2),
        ("SELECT count(*) FROM kv WHERE tag = $1", "DataFusion", 1),
        ("SELECT id, v + 1 FROM kv WHERE id = $1", "DataFusion", 1),
    ];
    for (text, path, params) in cases {
        let prepared = basalt_datafusion::prepare(&ctx, text).await.expect("prepare");
        assert!(prepared.path().starts_with(path), "{text}: {}", prepared.path());
        assert_eq!(prepared.parameter_count(), params, "{text}");
        for k in [-1i64, 0, 1, 3, 11, 42, 1000, 1998, 1999, 2500] {
            let values: Vec<ScalarValue> = if text.contains("tag = $1") {
                [ScalarValue::Utf8(Some(format!("t{}", k.rem_euclid(60)))), ScalarValue::Int64(Some(k))]
                    [..params]
                    .to_vec()
            } else {
                [ScalarValue::Int64(Some(k)), ScalarValue::Int64(Some(k + 25))][..params].to_vec()
            };
            let mut literal = text.to_string();
            for (i, v) in values.iter().enumerate().rev() {
                let written = match v {
                    ScalarValue::Utf8(Some(s)) => format!("'{s}'"),
                    other => other.to_string(),
                };
                literal = literal.replace(&format!("${}", i + 1), &written);
            }
            let got = prepared.execute(&values).await.unwrap_or_else(|e| panic!("{text} {values:?}: {e}"));
            let want = planned(&ctx, &literal).await;
            if text.contains("LIMIT") {
                let all = planned(&ctx, literal.split(" LIMIT").next().expect("text")).await;
                assert_eq!(got.num_rows(), all.len().min(3), "{literal}");
                assert!(rows(&got.batches).iter().all(|r| all.contains(r)), "{literal}");
            } else {
                assert_eq!(rows(&got.batches), want, "{literal}");
            }
            let names: Vec<String> = got.schema.fields().iter().map(|f| f.name().clone()).collect();
            let frame = basalt_datafusion::sql(&ctx, &literal).await.expect("plan");
            let want_names: Vec<String> = frame.schema().fields().iter().map(|f| f.name().clone()).collect();
            assert_eq!(names, want_names, "{literal}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_composite_key_point_query_is_a_get() {
    let (_dir, _db, ctx) = open();
    for text in [
        "CREATE TABLE pk2 (a VARCHAR, b INT, c DOUBLE, PRIMARY KEY (a, b))",
        "INSERT INTO pk2 VALUES ('x', 1, 1.5), ('x', 2, 2.5), ('it''s', 1, 3.5), ('y', -1, NULL)",
    ] {
        basalt_datafusion::sql(&ctx, text).await.expect(text).collect().await.expect(text);
    }
    let prepared =
        basalt_datafusion::prepare(&ctx, "SELECT c FROM pk2 WHERE a = $1 AND b = $2").await.expect("prepare");
    assert!(prepared.path().starts_with("direct"), "{}", prepared.path());
    let get = |a: &str, b: i32| vec![ScalarValue::Utf8(Some(a.into())), ScalarValue::Int32(Some(b))];
    for (a, b, want) in
        [("x", 2, vec!["2.5"]), ("it's", 1, vec!["3.5"]), ("y", -1, vec!["NULL"]), ("x", 3, vec![])]
    {
        let got = prepared.execute(&get(a, b)).await.expect("execute");
        assert_eq!(rows(&got.batches), want, "{a} {b}");
    }
    // An Int64 value for the INT column converts when it fits.
    let got = prepared
        .execute(&[ScalarValue::Utf8(Some("x".into())), ScalarValue::Int64(Some(1))])
        .await
        .expect("execute");
    assert_eq!(rows(&got.batches), vec!["1.5"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_of_the_wrong_type_or_count_are_errors_and_nulls_match_nothing() {
    let (_dir, db, ctx) = open();
    filled(&ctx, &db).await;
    let prepared = basalt_datafusion::prepare(&ctx, "SELECT v FROM kv WHERE id = $1").await.expect("prepare");
    assert_eq!(prepared.parameter_types(), vec![Some(DataType::Int64)]);
    for wrong in [
        ScalarValue::Utf8(Some("5".into())),
        ScalarValue::Float64(Some(5.5)),
        ScalarValue::Boolean(Some(true)),
        ScalarValue::Binary(Some(vec![5])),
    ] {
        let err = prepared.execute(std::slice::from_ref(&wrong)).await.expect_err("a wrong type is refused");
        assert!(err.to_string().contains("parameter $1"), "{wrong:?}: {err}");
    }
    let v32 = basalt_datafusion::prepare(&ctx, "SELECT id FROM kv WHERE v = $1").await.expect("prepare");
    let err = v32.execute(&[ScalarValue::Int64(Some(1 << 40))]).await.expect_err("out of range");
    assert!(err.to_string().contains("parameter $1"), "{err}");
    assert!(prepared.execute(&[]).await.is_err());
    assert!(prepared.execute(&[ScalarValue::Int64(Some(1)), ScalarValue::Int64(Some(2))]).await.is_err());
    let none = prepared.execute(&[ScalarValue::Int64(None)]).await.expect("a null parameter");
    assert_eq!(none.num_rows(), 0);
    assert_eq!(none.schema.fields().len(), 1);
    // Quotes and zero bytes are values, not text.
    basalt_datafusion::sql(&ctx, "INSERT INTO kv VALUES (5000, 1, 'a''b')")
        .await
        .expect("insert")
        .collect()
        .await
        .expect("insert");
    let by_tag = basalt_datafusion::prepare(&ctx, "SELECT id FROM kv WHERE tag = $1").await.expect("prepare");
    for (tag, want) in [("a'b", vec!["5000"]), ("a'b' OR '1'='1", vec![]), ("a\0b", vec![])] {
        let got = by_tag.execute(&[ScalarValue::Utf8(Some(tag.into()))]).await.expect("execute");
        assert_eq!(rows(&got.batches), want, "{tag:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_cache_plans_again_when_a_table_is_made_again() {
    let (_dir, _db, ctx) = open();
    let run = |text: &'static str| {
        let ctx = ctx.clone();
        async move { basalt_datafusion::sql(&ctx, text).await.expect(text).collect().await.expect(text) }
    };
    run("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)").await;
    run("INSERT INTO t VALUES (1, 'one')").await;
    let text = "SELECT * FROM t WHERE id = 1";
    for _ in 0..2 {
        let got = basalt_datafusion::query(&ctx, text, &[]).await.expect("query");
        assert_eq!(rows(&got.batches), vec!["1|one"]);
    }
    run("DROP TABLE t").await;
    assert!(basalt_datafusion::query(&ctx, text, &[]).await.is_err(), "the table is gone");
    run("CREATE TABLE t (id BIGINT PRIMARY KEY, w INT, v VARCHAR)").await;
    run("INSERT INTO t VALUES (1, 7, 'uno')").await;
    let got = basalt_datafusion::query(&ctx, text, &[]).await.expect("query");
    assert_eq!(rows(&got.batches), vec!["1|7|uno"]);
    assert_eq!(got.schema.fields().len(), 3);
    // Statements Basalt runs itself go through too, uncached.
    let out = basalt_datafusion::query(&ctx, "DELETE FROM t WHERE id = 1", &[]).await.expect("delete");
    assert_eq!(rows(&out.batches), vec!["1"]);
    assert!(
        basalt_datafusion::query(&ctx, "DELETE FROM t WHERE id = $1", &[ScalarValue::Int64(Some(1))])
            .await
            .is_err()
    );
    let got = basalt_datafusion::query(&ctx, text, &[]).await.expect("query");
    assert_eq!(got.num_rows(), 0);
    assert_eq!(got.schema.fields().len(), 3, "an empty answer keeps its schema");
}

/// The outside review's first finding: the direct path reads the plan
/// before DataFusion's type coercion, which compares a string column with
/// a number as numbers and an integer column with a float as floats; the
/// direct path converted the value instead and answered differently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_of_other_types_answer_as_datafusion_does() {
    let (_dir, _db, ctx) = open();
    run(&ctx, "CREATE TABLE n (id INT PRIMARY KEY, s VARCHAR, big BIGINT, f REAL, b BOOLEAN)").await;
    run(
        &ctx,
        "INSERT INTO n VALUES (1, '5', 9007199254740993, 0.1, true), (2, '05', 1, 1.5, false), \
         (3, '10', 2, -0.0, NULL), (4, ' 5', 3, 2.0, true)",
    )
    .await;
    for filter in [
        "s = 5",
        "s < 6",
        "s > 7",
        "big = 9007199254740992.0",
        "big > 9007199254740992.0",
        "id = 1.0",
        "id < 2.5",
        "id = 3000000000",
        "id = '2'",
        "f = 0.1",
        "f = 1.5",
        "f = 0",
        "s = '5' AND id = 1",
        "id BETWEEN 1 AND 2.5",
    ] {
        let text = format!("SELECT id FROM n WHERE {filter}");
        let wrapped = format!("SELECT * FROM ({text}) sub");
        let want = rows(&run(&ctx, &wrapped).await);
        for pass in ["first", "cached"] {
            let got =
                basalt_datafusion::query(&ctx, &text, &[]).await.unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(rows(&got.batches), want, "{text} ({pass})");
        }
    }
    // Where DataFusion refuses the comparison, so does the statement.
    for filter in ["b = 1", "id = true"] {
        let text = format!("SELECT id FROM n WHERE {filter}");
        let planned = basalt_datafusion::sql(&ctx, &format!("SELECT * FROM ({text}) sub")).await;
        let planned = match planned {
            Ok(frame) => frame.collect().await.map(|b| rows(&b)),
            Err(e) => Err(e),
        };
        let direct = basalt_datafusion::query(&ctx, &text, &[]).await.map(|o| rows(&o.batches));
        assert_eq!(direct.is_err(), planned.is_err(), "{text}: {direct:?} against {planned:?}");
    }
}

/// The outside review's second finding: a prepared statement on
/// DataFusion's path kept the table as planned, and after the table was
/// made again with another key it answered from the wrong key range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_statement_refuses_a_table_made_again_differently() {
    let (_dir, _db, ctx) = open();
    run(&ctx, "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, PRIMARY KEY (a))").await;
    run(&ctx, "INSERT INTO t VALUES (1, 10), (2, 20)").await;
    let ordered =
        basalt_datafusion::prepare(&ctx, "SELECT a, b FROM t WHERE a = 1 ORDER BY a").await.expect("prepare");
    let count =
        basalt_datafusion::prepare(&ctx, "SELECT count(*) FROM t WHERE a = $1").await.expect("prepare");
    let direct = basalt_datafusion::prepare(&ctx, "SELECT b FROM t WHERE a = $1").await.expect("prepare");
    assert_eq!(rows(&ordered.execute(&[]).await.expect("run").batches), vec!["1|10"]);
    run(&ctx, "DROP TABLE t").await;
    run(&ctx, "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, PRIMARY KEY (b))").await;
    run(&ctx, "INSERT INTO t VALUES (5, 1), (1, 7)").await;
    let one = [ScalarValue::Int32(Some(1))];
    for (statement, params) in [(&ordered, &[][..]), (&count, &one[..]), (&direct, &one[..])] {
        let err = statement.execute(params).await.expect_err("the table changed");
        assert!(err.to_string().contains("prepare it again"), "{}: {err}", statement.text());
    }
    // Through the plan cache the text is simply planned again.
    let got = basalt_datafusion::query(&ctx, "SELECT a, b FROM t WHERE a = 1 ORDER BY a", &[])
        .await
        .expect("query");
    assert_eq!(rows(&got.batches), vec!["1|7"]);
}

/// The outside review's fourth finding: statements only DataFusion's own
/// parser or planner takes still run through `query` (without parameters).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_only_datafusion_parses_still_run() {
    let (dir, _db, ctx) = open();
    run(&ctx, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)").await;
    run(&ctx, "INSERT INTO t VALUES (1, 'a'), (2, 'b')").await;
    let csv = dir.path().join("out.csv");
    let copy = format!("COPY (SELECT * FROM t) TO '{}' STORED AS CSV", csv.display());
    basalt_datafusion::query(&ctx, &copy, &[]).await.expect("COPY");
    assert!(std::fs::read_to_string(&csv).expect("csv").contains("2,b"));
    basalt_datafusion::query(&ctx, "EXPLAIN FORMAT INDENT SELECT * FROM t WHERE id = 1", &[])
        .await
        .expect("EXPLAIN");
    assert!(basalt_datafusion::query(&ctx, &copy, &[ScalarValue::Int64(Some(1))]).await.is_err());
    // A parser setting changes what a cached text means.
    let upper = "SELECT ID FROM t WHERE ID = 1";
    assert_eq!(basalt_datafusion::query(&ctx, upper, &[]).await.expect("query").num_rows(), 1);
    basalt_datafusion::query(&ctx, "SET datafusion.sql_parser.enable_ident_normalization = false", &[])
        .await
        .expect("SET");
    assert!(basalt_datafusion::query(&ctx, upper, &[]).await.is_err(), "ID is not id without normalization");
}

/// The statement shapes a schema change must not outlive, each with its
/// parameters: the direct path's point query and row count, and DataFusion's
/// plans (an `OR`, an `ORDER BY`, an `IN` list, an aggregate, a join, an
/// `INSERT` with parameters), and the statements Basalt runs itself.
fn shapes() -> Vec<(&'static str, Vec<ScalarValue>)> {
    let id = |v: i64| ScalarValue::Int64(Some(v));
    vec![
        ("SELECT id, a FROM t WHERE id = $1", vec![id(1)]),
        ("SELECT count(*) FROM t", vec![]),
        ("SELECT * FROM t WHERE id = $1 OR a > 0", vec![id(1)]),
        ("SELECT id, a FROM t WHERE id = $1 ORDER BY a", vec![id(1)]),
        ("SELECT a FROM t WHERE id IN ($1, $2)", vec![id(1), id(2)]),
        ("SELECT sum(a) FROM t WHERE id >= $1", vec![id(1)]),
        ("SELECT t.id, a, b FROM t JOIN u ON t.id = u.id WHERE t.id = $1", vec![id(1)]),
        ("INSERT INTO t (id, a) VALUES ($1, $2)", vec![id(9), ScalarValue::Int32(Some(90))]),
        ("UPDATE t SET a = a + 1 WHERE id = 1", vec![]),
        ("DELETE FROM t WHERE id = 2", vec![]),
    ]
}

/// Each change of `t` a prepared statement must notice: a column added, a
/// column dropped and added again with another type, a column renamed,
/// the table dropped and made again with other columns.
const CHANGES: [&[&str]; 4] = [
    &["ALTER TABLE t ADD COLUMN z BIGINT DEFAULT 5"],
    &["ALTER TABLE t DROP COLUMN a", "ALTER TABLE t ADD COLUMN a VARCHAR DEFAULT 'zzz'"],
    &["ALTER TABLE t RENAME COLUMN a TO c"],
    &[
        "DROP TABLE t",
        "CREATE TABLE t (id BIGINT, a VARCHAR, PRIMARY KEY (id))",
        "INSERT INTO t VALUES (1, 'x')",
    ],
];

/// The outside review's first finding: plans made before `ALTER TABLE`
/// answered with the old layout (two columns after an ADD, a VARCHAR's
/// bytes read as an INTEGER, `[]` after a RENAME, a panic in arrow's
/// cast). Every prepared shape now refuses with "prepare it again", and
/// prepared again it answers as the text means now; the plan cache plans
/// the text again by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_prepared_shape_refuses_a_table_changed_since_it_was_prepared() {
    for change in CHANGES {
        let (_dir, _db, ctx) = open();
        run(&ctx, "CREATE TABLE t (id BIGINT, a INTEGER, PRIMARY KEY (id))").await;
        run(&ctx, "INSERT INTO t VALUES (1, 10), (2, 20)").await;
        run(&ctx, "CREATE TABLE u (id BIGINT, b VARCHAR, PRIMARY KEY (id))").await;
        run(&ctx, "INSERT INTO u VALUES (1, 'x'), (2, 'y')").await;
        let mut prepared = Vec::new();
        for (text, params) in shapes() {
            let statement =
                basalt_datafusion::prepare(&ctx, text).await.unwrap_or_else(|e| panic!("{text}: {e}"));
            // Cached by the plan cache too (queries only are kept).
            if !text.starts_with("INSERT") && !text.starts_with("UPDATE") && !text.starts_with("DELETE") {
                basalt_datafusion::query(&ctx, text, &params).await.unwrap_or_else(|e| panic!("{text}: {e}"));
            }
            prepared.push((statement, params));
        }
        for step in change {
            run(&ctx, step).await;
        }
        for (statement, params) in &prepared {
            let text = statement.text();
            let err = statement.execute(params).await.expect_err(&format!("{text} after {change:?}"));
            assert!(err.to_string().contains("prepare it again"), "{text} after {change:?}: {err}");
            assert!(statement.check_tables().is_err(), "{text} after {change:?}");
            // Prepared again, or through the plan cache, the text means
            // what it means now: the same answer both ways, or the same
            // refusal (a column the text names is gone).
            let again = match basalt_datafusion::prepare(&ctx, text).await {
                Ok(p) => p.execute(params).await.map(|o| (o.schema.fields().len(), rows(&o.batches))),
                Err(e) => Err(e),
            };
            if text.starts_with("SELECT") {
                let cached = basalt_datafusion::query(&ctx, text, params)
                    .await
                    .map(|o| (o.schema.fields().len(), rows(&o.batches)));
                assert_eq!(
                    again.as_ref().map_err(|_| ()),
                    cached.as_ref().map_err(|_| ()),
                    "{text} after {change:?}: {again:?} against {cached:?}"
                );
            }
            if let Err(e) = &again {
                assert!(!e.to_string().contains("prepare it again"), "{text} after {change:?}: {e}");
            }
        }
    }
}

/// The first repro of the outside review, checked for its answers: after
/// an ADD COLUMN, `SELECT *` prepared again returns the new column; after
/// `a` is dropped and added again as VARCHAR, the row reads `'zzz'`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_again_a_statement_answers_with_the_new_columns() {
    let (_dir, _db, ctx) = open();
    run(&ctx, "CREATE TABLE t (id BIGINT, a INTEGER, PRIMARY KEY (id))").await;
    run(&ctx, "INSERT INTO t VALUES (1, 10), (2, 20)").await;
    let one = [ScalarValue::Int64(Some(1))];
    let star =
        basalt_datafusion::prepare(&ctx, "SELECT * FROM t WHERE id = $1 OR a > 0").await.expect("prepare");
    let ordered = basalt_datafusion::prepare(&ctx, "SELECT id, a FROM t WHERE id = $1 ORDER BY a")
        .await
        .expect("prepare");
    assert_eq!(rows(&star.execute(&one).await.expect("run").batches), vec!["1|10", "2|20"]);
    run(&ctx, "ALTER TABLE t ADD COLUMN z BIGINT DEFAULT 5").await;
    assert!(star.execute(&one).await.is_err());
    let star = basalt_datafusion::prepare(&ctx, star.text()).await.expect("prepare again");
    assert_eq!(rows(&star.execute(&one).await.expect("run").batches), vec!["1|10|5", "2|20|5"]);
    run(&ctx, "ALTER TABLE t DROP COLUMN a").await;
    run(&ctx, "ALTER TABLE t ADD COLUMN a VARCHAR DEFAULT 'zzz'").await;
    assert!(ordered.execute(&one).await.is_err());
    let ordered = basalt_datafusion::prepare(&ctx, ordered.text()).await.expect("prepare again");
    assert_eq!(rows(&ordered.execute(&one).await.expect("run").batches), vec!["1|zzz"]);
    // A column dropped and added again with its name, type and default is
    // read as the column it now is, not refused: the plan names it.
    let by_a = basalt_datafusion::prepare(&ctx, "SELECT id FROM t WHERE a = $1").await.expect("prepare");
    run(&ctx, "ALTER TABLE t DROP COLUMN a").await;
    run(&ctx, "ALTER TABLE t ADD COLUMN a VARCHAR DEFAULT 'zzz'").await;
    let zzz = [ScalarValue::Utf8(Some("zzz".into()))];
    assert_eq!(rows(&by_a.execute(&zzz).await.expect("same column").batches), vec!["1", "2"]);
    // Another default is another column for an INSERT that leaves it out.
    let insert =
        basalt_datafusion::prepare(&ctx, "INSERT INTO t (id, z) VALUES ($1, 1)").await.expect("prepare");
    run(&ctx, "ALTER TABLE t DROP COLUMN a").await;
    run(&ctx, "ALTER TABLE t ADD COLUMN a VARCHAR DEFAULT 'yyy'").await;
    let err = insert.execute(&[ScalarValue::Int64(Some(3))]).await.expect_err("another default");
    assert!(err.to_string().contains("prepare it again"), "{err}");
}

/// A logical plan made before a column change and run after it (the
/// window between a prepared statement's check and its scan): the scan
/// either reads the version it was planned for or refuses with "prepare
/// it again"; never a batch of the new columns under the old names, which
/// DataFusion would misread or cast. Each kind of change, with and
/// without a filter, projected and whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_run_after_a_column_change_reads_its_version_or_refuses() {
    let changes = [
        "ALTER TABLE t ADD COLUMN z BIGINT DEFAULT 5",
        "ALTER TABLE t DROP COLUMN a",
        "ALTER TABLE t RENAME COLUMN a TO b",
    ];
    let queries = ["SELECT * FROM t", "SELECT id, a FROM t WHERE a > 0 ORDER BY a", "SELECT sum(a) FROM t"];
    for change in changes {
        for query in queries {
            let (_dir, _db, ctx) = open();
            run(&ctx, "CREATE TABLE t (id BIGINT, a INTEGER, PRIMARY KEY (id))").await;
            run(&ctx, "INSERT INTO t VALUES (1, 10), (2, 20)").await;
            let want = rows(&run(&ctx, query).await);
            let frame = basalt_datafusion::sql(&ctx, query).await.expect("plan");
            run(&ctx, change).await;
            // The logical plan (what a prepared statement keeps) holds the
            // table as it was; its scans open now, at the new version.
            let ran = match frame.create_physical_plan().await {
                Ok(plan) => datafusion::physical_plan::collect(plan, ctx.task_ctx()).await,
                Err(e) => Err(e),
            };
            match ran {
                Ok(batches) => {
                    assert_eq!(rows(&batches), want, "{query} after {change}: the planned version");
                }
                Err(e) => assert!(e.to_string().contains("prepare it again"), "{query} after {change}: {e}"),
            }
        }
    }
}

/// An INSERT planned before a column change and run after it: its values
/// were planned for the old columns, and would land by position in
/// others (a string of digits cast into a new VARCHAR, a number into an
/// unrelated column). It is refused and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_planned_before_a_column_change_is_refused_and_writes_nothing() {
    let changes = [
        "ALTER TABLE t DROP COLUMN a, ADD COLUMN a VARCHAR",
        "ALTER TABLE t DROP COLUMN a, ADD COLUMN b INTEGER",
        "ALTER TABLE t RENAME COLUMN a TO b",
        "ALTER TABLE t ADD COLUMN z BIGINT DEFAULT 5",
    ];
    for change in changes {
        let (_dir, _db, ctx) = open();
        run(&ctx, "CREATE TABLE t (id BIGINT, a INTEGER, PRIMARY KEY (id))").await;
        let insert = basalt_datafusion::sql(&ctx, "INSERT INTO t VALUES (1, 10)").await.expect("plan");
        run(&ctx, change).await;
        let error = insert.collect().await.expect_err(change);
        assert!(error.to_string().contains("prepare it again"), "{change}: {error}");
        assert_eq!(rows(&run(&ctx, "SELECT count(*) FROM t").await), ["0"], "{change}: nothing written");
    }
}

/// A physical plan run again after a column change: its first run read the
/// scans opened when it was planned; the second opens them at the new
/// version, and the scan refuses batches of other columns than planned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_physical_plan_run_again_after_a_column_change_refuses_the_new_columns() {
    for query in ["SELECT * FROM t", "SELECT id, a FROM t"] {
        let (_dir, _db, ctx) = open();
        run(&ctx, "CREATE TABLE t (id BIGINT, a INTEGER, PRIMARY KEY (id))").await;
        run(&ctx, "INSERT INTO t VALUES (1, 10), (2, 20)").await;
        let frame = basalt_datafusion::sql(&ctx, query).await.expect("plan");
        let plan = frame.create_physical_plan().await.expect("physical plan");
        let first =
            datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx()).await.expect("first run");
        assert_eq!(rows(&first), ["1|10", "2|20"], "{query}");
        run(&ctx, "ALTER TABLE t DROP COLUMN a, ADD COLUMN a VARCHAR DEFAULT 'zzz'").await;
        let error = datafusion::physical_plan::collect(plan, ctx.task_ctx()).await.expect_err(query);
        assert!(error.to_string().contains("prepare it again"), "{query}: {error}");
    }
}
