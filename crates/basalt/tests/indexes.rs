//! Secondary indexes case by case: bad input gives a typed error and
//! changes nothing; bloom filters never hide an index prefix; two writers
//! of one unique value: exactly one wins; a scan takes an index only when
//! it selects few rows; indexes survive reopening; rows rewritten during
//! a build keep their entries; power lost at any point of a creation
//! leaves no index or a whole one; the read counters count what was read;
//! a table's bytes on disk are its rows' and each index's, apart.

use std::sync::Arc;

use arrow_array::{ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::testing::MemFs;
use basalt::{
    CmpOp, Db, Error, Filter, IndexOptions, IndexPredicate, KeyValue, LookupOptions, Options, Predicate,
    ScanOptions, ScanPlan, Table, TableOptions,
};

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("city", DataType::Utf8, true),
        Field::new("age", DataType::Int64, false),
        Field::new("price", DataType::Decimal128(10, 2), true),
    ]))
}

fn rows(ids: impl Iterator<Item = i64>, city: impl Fn(i64) -> Option<String>) -> RecordBatch {
    let ids: Vec<i64> = ids.collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(StringArray::from(ids.iter().map(|&i| city(i)).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(ids.iter().map(|i| i % 90 - 45).collect::<Vec<_>>())),
        Arc::new(
            Decimal128Array::from(ids.iter().map(|&i| Some(i128::from(i))).collect::<Vec<_>>())
                .with_precision_and_scale(10, 2)
                .expect("decimal"),
        ),
    ];
    RecordBatch::try_new(schema(), columns).expect("batch")
}

/// A city no other row has (`None` for every 7th row): `tag` tells a
/// rewrite from the first write.
fn unique_city(i: i64, tag: i64) -> Option<String> {
    (i % 7 != 0).then(|| format!("{i}-{tag}"))
}

/// The primary keys of `ids`, as a delete takes them.
fn key_batch(ids: impl Iterator<Item = i64>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids.collect::<Vec<_>>()))]).expect("keys")
}

fn open(fs: &MemFs) -> (Db, Table) {
    // Index builds sort in runs of the write buffer's size: several here.
    let opts = Options::default()
        .fs(Arc::new(fs.clone()))
        .bloom_bits_per_key(10)
        .memtable_bytes_max(64 << 10)
        .write_buffer_bytes_max(512 << 10);
    let db = Db::open("/db", opts).expect("open");
    let table = match db.table("t") {
        Ok(t) => t,
        Err(_) => db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create"),
    };
    (db, table)
}

fn city_of(i: i64) -> Option<String> {
    (i % 7 != 0).then(|| format!("c\0{}", i % 50))
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let fs = MemFs::new();
    let (db, table) = open(&fs);
    table.write(&rows(0..100, city_of)).expect("write");
    table.create_index("by_city", &["city"], IndexOptions::default()).expect("index");
    let before = table.indexes();
    let cases: Vec<(&str, Vec<&str>, IndexOptions)> = vec![
        ("a", vec!["nope"], IndexOptions::default()),
        ("b", vec!["price"], IndexOptions::default()),
        ("c", vec![], IndexOptions::default()),
        ("d", vec!["age", "age"], IndexOptions::default()),
        ("e", vec!["age"], IndexOptions::default().include(vec!["id".into()])),
        ("f", vec!["age"], IndexOptions::default().include(vec!["nope".into()])),
        ("by_city", vec!["age"], IndexOptions::default()),
        ("", vec!["age"], IndexOptions::default()),
    ];
    for (name, columns, opts) in cases {
        let got = table.create_index(name, &columns, opts);
        assert!(matches!(got, Err(Error::InvalidArgument(_))), "{name} {columns:?}: {got:?}");
        assert_eq!(table.indexes(), before, "{name}: nothing created");
    }
    // A unique index over rows that already break it.
    let got = table.create_index("u", &["age"], IndexOptions::default().unique(true));
    assert!(matches!(got, Err(Error::UniqueViolation { ref index, .. }) if index == "u"), "{got:?}");
    assert_eq!(table.indexes(), before);
    // The default keyspace's table face has no indexes.
    let kv = db.table("default").expect("default");
    assert!(matches!(
        kv.create_index("k", &["value"], IndexOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    // Lookups with a wrong value type, a wrong arity, a null in a
    // non-nullable column, or an unknown index.
    let lookups = [
        ("by_city", IndexPredicate::Eq(vec![Some(KeyValue::I64(3))])),
        ("by_city", IndexPredicate::Eq(vec![])),
        ("by_city", IndexPredicate::Prefix(vec![Some(KeyValue::Str("x")), Some(KeyValue::I64(1))])),
        ("nope", IndexPredicate::Eq(vec![Some(KeyValue::Str("x"))])),
    ];
    for (index, predicate) in lookups {
        let got = table.lookup(index, predicate.clone(), LookupOptions::default());
        assert!(
            matches!(got, Err(Error::InvalidArgument(_) | Error::SchemaMismatch(_))),
            "{predicate:?}: {got:?}"
        );
    }
    table.create_index("by_age", &["age"], IndexOptions::default()).expect("index");
    let got = table.lookup("by_age", IndexPredicate::Eq(vec![None]), LookupOptions::default());
    assert!(matches!(got, Err(Error::InvalidArgument(_))), "{got:?}");
}

#[test]
fn bytes_on_disk_are_the_rows_and_each_index_apart() {
    let fs = MemFs::new();
    let (db, table) = open(&fs);
    table.write(&rows(0..2_000, city_of)).expect("write");
    table.create_index("by_city", &["city"], IndexOptions::default()).expect("index");
    table.create_index("by_age", &["age"], IndexOptions::default()).expect("index");
    db.flush().expect("flush");
    let bytes = table.bytes_on_disk().expect("bytes");
    assert!(bytes.rows.sst_bytes > 0, "{bytes:?}");
    let names: Vec<&str> = bytes.indexes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["by_city", "by_age"], "in creation order, as Table::indexes lists them");
    assert!(bytes.indexes.iter().all(|(_, b)| b.sst_bytes > 0), "{bytes:?}");
    // Every SST of the database is the table's or one of its indexes'.
    let files: u64 = basalt::inspect::files(&db).iter().map(|f| f.size).sum();
    let ssts = bytes.rows.sst_bytes + bytes.indexes.iter().map(|(_, b)| b.sst_bytes).sum::<u64>();
    assert_eq!(ssts, files, "{bytes:?}");
    assert_eq!(bytes.total(), files, "no blob values here");
    // The rows' own figure is the estimate's, with no memtable holding any.
    assert_eq!(bytes.rows.sst_bytes, table.estimate().expect("estimate").bytes);
    // Dropping an index drops its figure, and only its.
    let by_age = bytes.indexes[1].1;
    table.drop_index("by_age").expect("drop");
    let after = table.bytes_on_disk().expect("bytes");
    assert_eq!(after.indexes, vec![bytes.indexes[0].clone()]);
    assert_eq!(after.rows, bytes.rows);
    assert_eq!(after.total(), bytes.total() - by_age.total());
}

#[test]
fn bloom_filters_never_hide_an_index_prefix_and_indexes_survive_reopen() {
    let fs = MemFs::new();
    let (db, table) = open(&fs);
    table
        .create_index("by_city", &["city"], IndexOptions::default().include(vec!["age".into()]))
        .expect("index");
    table.write(&rows(0..5_000, city_of)).expect("write");
    db.flush().expect("flush");
    table.compact().expect("compact");
    let want = (0..5_000).filter(|i| city_of(*i).as_deref() == Some("c\x003")).count() as u64;
    let eq = || IndexPredicate::Eq(vec![Some(KeyValue::Str("c\x003"))]);
    assert_eq!(table.count("by_city", eq()).expect("count"), want);
    drop(table);
    db.close().expect("close");
    let (_db, table) = open(&fs);
    assert_eq!(table.indexes().len(), 1);
    assert_eq!(table.count("by_city", eq()).expect("count"), want);
    let nulls = table.count("by_city", IndexPredicate::Eq(vec![None])).expect("count nulls");
    assert_eq!(nulls, (0..5_000).filter(|i| i % 7 == 0).count() as u64);
    let found = table
        .lookup("by_city", eq(), LookupOptions::default().projection(Some(vec!["id".into(), "age".into()])))
        .expect("covering lookup");
    assert_eq!(found.num_rows() as u64, want);
}

#[test]
fn two_writers_of_one_unique_value_exactly_one_wins() {
    let fs = MemFs::new();
    let (_db, table) = open(&fs);
    table.create_index("u_city", &["city"], IndexOptions::default().unique(true)).expect("index");
    for round in 0..50i64 {
        let city = format!("city {round}");
        let outcomes: Vec<Result<(), Error>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|w| {
                    let (table, city) = (table.clone(), city.clone());
                    s.spawn(move || {
                        table.write(&rows(std::iter::once(round * 2 + w), |_| Some(city.clone())))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("writer")).collect()
        });
        let won = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(won, 1, "round {round}: {outcomes:?}");
        assert!(outcomes.iter().any(|o| matches!(o, Err(Error::UniqueViolation { .. }))));
        let n = table.count("u_city", IndexPredicate::Eq(vec![Some(KeyValue::Str(&city))])).expect("count");
        assert_eq!(n, 1);
    }
}

#[test]
fn a_scan_takes_an_index_only_when_it_selects_few_rows() {
    let fs = MemFs::new();
    let (db, table) = open(&fs);
    table.write(&rows(0..20_000, city_of)).expect("write");
    db.flush().expect("flush");
    table.create_index("by_city", &["city"], IndexOptions::default()).expect("index");
    table.create_index("by_age", &["age"], IndexOptions::default()).expect("index");
    let scan = |predicates: Vec<Predicate>| {
        let scan = table.scan(ScanOptions::default().filter(Some(Filter::all(predicates)))).expect("scan");
        let plan = scan.plan().clone();
        let rows: usize = scan.map(|b| b.expect("batch").num_rows()).sum();
        (plan, rows)
    };
    let city = |c: &str| Predicate::new("city", CmpOp::Eq, Arc::new(StringArray::from(vec![c])) as ArrayRef);
    let age = |op, v: i64| Predicate::new("age", op, Arc::new(Int64Array::from(vec![v])) as ArrayRef);
    let (plan, n) = scan(vec![city("c\x003")]);
    assert!(matches!(plan, ScanPlan::Index { ref index, .. } if index == "by_city"), "{plan:?}");
    assert_eq!(n, (0..20_000).filter(|i| city_of(*i).as_deref() == Some("c\x003")).count());
    // Half the table: reading it whole is cheaper.
    let (plan, n) = scan(vec![age(CmpOp::GtEq, 0)]);
    assert_eq!(plan, ScanPlan::KeyRange);
    assert_eq!(n, (0..20_000).filter(|i| i % 90 - 45 >= 0).count());
    // A range on the first column, narrow enough.
    let (plan, n) = scan(vec![age(CmpOp::Gt, 40), age(CmpOp::LtEq, 42)]);
    assert!(matches!(plan, ScanPlan::Index { ref index, .. } if index == "by_age"), "{plan:?}");
    assert_eq!(n, (0..20_000).filter(|i| (41..=42).contains(&(i % 90 - 45))).count());
}

/// Rows rewritten with unchanged indexed values while an index is built
/// still get their entries: the build skips rows written after it began,
/// so the write itself must give them one (the kill test found this).
#[test]
fn rows_rewritten_unchanged_during_a_build_keep_their_entries() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const ROWS: i64 = 20_000;
    let fs = MemFs::new();
    let (db, table) = open(&fs);
    for start in (0..ROWS).step_by(1000) {
        table.write(&rows(start..start + 1000, city_of)).expect("write");
    }
    let built = AtomicBool::new(false);
    let rewrites = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut rewrites = 0u64;
            // From the last rows back: the build reaches them last.
            let mut start = ROWS;
            while !built.load(Ordering::Relaxed) {
                start = if start == 0 { ROWS - 50 } else { start - 50 };
                table.write(&rows(start..start + 50, city_of)).expect("rewrite");
                rewrites += 1;
            }
            rewrites
        });
        table.create_index("by_city", &["city"], IndexOptions::default()).expect("index");
        built.store(true, Ordering::Relaxed);
        writer.join().expect("writer")
    });
    assert!(rewrites > 0, "no write ran during the build");
    let all = IndexPredicate::Range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
    assert_eq!(
        table.count("by_city", all).expect("count"),
        ROWS as u64,
        "{rewrites} rewrites during the build"
    );
    let city = city_of(1).expect("a city");
    let got = table.count("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str(&city))])).expect("count");
    assert_eq!(got, (0..ROWS).filter(|&i| city_of(i) == city_of(1)).count() as u64);
    drop(db);
}

/// Writes that change indexed values, delete rows and add new ones while
/// an index is built (sorted into SSTs from a snapshot, then brought up to
/// date with those writes): afterwards every index holds exactly its
/// table's rows, by the full check. Seeded; the seed is printed on failure.
#[test]
fn changes_during_a_build_leave_exactly_the_rows_entries() {
    use rand::{Rng, SeedableRng, rngs::StdRng};
    use std::sync::atomic::{AtomicBool, Ordering};
    const ROWS: i64 = 20_000;
    for seed in 0..4u64 {
        let fs = MemFs::new();
        let (db, table) = open(&fs);
        for start in (0..ROWS).step_by(1000) {
            table.write(&rows(start..start + 1000, |i| unique_city(i, 0))).expect("write");
        }
        if seed % 2 == 0 {
            db.flush().expect("flush");
        }
        let built = AtomicBool::new(false);
        let writes = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut writes = 0u64;
                while !built.load(Ordering::Relaxed) || writes < 20 {
                    let start = rng.random_range(0..ROWS + 2000);
                    let n = rng.random_range(1..40);
                    let shift = rng.random_range(1..100);
                    match rng.random_range(0..3) {
                        0 => table.write(&rows(start..start + n, |i| unique_city(i, shift))),
                        1 => table.delete(&key_batch(start..start + n)),
                        _ => table.write(&rows(start..start + n, |_| None)),
                    }
                    .unwrap_or_else(|e| panic!("seed {seed}: write: {e}"));
                    writes += 1;
                }
                writes
            });
            let by_city = table.create_index("by_city", &["city"], IndexOptions::default());
            let unique = table.create_index(
                "u_city",
                &["city"],
                IndexOptions::default().unique(true).include(vec!["age".into()]),
            );
            // The writer stops only once told, even when a build failed.
            built.store(true, Ordering::Relaxed);
            let done = writer.join().expect("writer");
            by_city.unwrap_or_else(|e| panic!("seed {seed}: index: {e}"));
            unique.unwrap_or_else(|e| panic!("seed {seed}: unique index: {e}"));
            done
        });
        let checks = basalt::inspect::check_indexes(&table).expect("check");
        assert_eq!(checks.len(), 2, "seed {seed}");
        for c in checks {
            assert!(
                c.consistent && c.rows == c.entries,
                "seed {seed}, {writes} writes during the builds: {c:?}"
            );
        }
        drop(db);
    }
}

/// A row written during a unique index's build with a value an existing
/// row holds: the write or the build fails, never both succeed.
#[test]
fn a_duplicate_written_during_a_unique_build_fails_the_write_or_the_build() {
    const ROWS: i64 = 20_000;
    for delay_writes in [0u64, 1, 5, 20] {
        let fs = MemFs::new();
        let (db, table) = open(&fs);
        for start in (0..ROWS).step_by(1000) {
            table.write(&rows(start..start + 1000, |i| unique_city(i, 0))).expect("write");
        }
        let (built, written) = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(delay_writes));
                // Row 8's city, in a new row.
                table.write(&rows(ROWS + 8..ROWS + 9, |_| unique_city(8, 0)))
            });
            let built = table.create_index("u_city", &["city"], IndexOptions::default().unique(true));
            (built, writer.join().expect("writer"))
        });
        match (&built, &written) {
            (Ok(()), Ok(())) => {
                panic!("delay {delay_writes} ms: both the build and the duplicate write succeeded")
            }
            (Err(Error::UniqueViolation { .. }), Ok(())) => {
                assert!(table.indexes().is_empty(), "delay {delay_writes} ms: a failed build left its index");
            }
            (Ok(()), Err(Error::UniqueViolation { .. })) => {
                let checks = basalt::inspect::check_indexes(&table).expect("check");
                assert!(checks.iter().all(|c| c.consistent), "delay {delay_writes} ms: {checks:?}");
            }
            other => panic!("delay {delay_writes} ms: unexpected outcome {other:?}"),
        }
        drop(db);
    }
}

/// Power lost at every point of an index's creation (after each of its
/// file-system writes): the reopened table has all its rows, and either
/// no index or one whose entries are exactly its rows; a creation that
/// returned `Ok` always left its index.
#[test]
fn index_creation_survives_power_loss_at_every_point() {
    use basalt::testing::CrashMode;
    const ROWS: i64 = 10_000;
    let base = MemFs::new();
    {
        let (db, table) = open(&base);
        for start in (0..ROWS).step_by(1000) {
            table.write(&rows(start..start + 1000, city_of)).expect("write");
        }
        db.flush().expect("flush");
    }
    let create = |table: &Table| table.create_index("by_city", &["city"], IndexOptions::default());
    let healthy = base.process_crash();
    let ops = {
        let (_db, table) = open(&healthy);
        let before = healthy.mutating_ops();
        create(&table).expect("healthy creation");
        healthy.mutating_ops() - before
    };
    assert!(ops > 3, "creation made {ops} writes");
    let city = city_of(1).expect("a city");
    let per_city = (0..ROWS).filter(|&i| city_of(i) == city_of(1)).count() as u64;
    for point in 0..=ops {
        let fs = base.process_crash();
        let created = {
            let (_db, table) = open(&fs);
            fs.freeze_after(point);
            create(&table).is_ok()
        };
        for mode in [CrashMode::DropUnsynced, CrashMode::TearLastWrite] {
            let image = fs.crash(mode, point);
            let (_db, table) = open(&image);
            let at = format!(
                "power lost after {point} of {ops} writes ({mode:?}), creation returned ok: {created}"
            );
            let rows =
                table.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch").num_rows());
            assert_eq!(rows.sum::<usize>(), ROWS as usize, "{at}");
            if !table.indexes().iter().any(|i| i.name == "by_city") {
                assert!(!created, "{at}: the index is gone");
                continue;
            }
            let all = IndexPredicate::Range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
            assert_eq!(table.count("by_city", all).expect("count"), ROWS as u64, "{at}");
            let eq = IndexPredicate::Eq(vec![Some(KeyValue::Str(&city))]);
            assert_eq!(
                table.lookup("by_city", eq, LookupOptions::default()).expect("lookup").num_rows() as u64,
                per_city,
                "{at}"
            );
        }
    }
}

/// The read counters say what a query read: a lookup its entries and the
/// rows it fetched, a covering lookup and a count their entries alone, a
/// filtered scan every row of the blocks it decoded.
#[test]
fn stats_count_index_entries_and_table_rows_read() {
    let fs = MemFs::new();
    let (db, table) = open(&fs);
    table.write(&rows(0..5_000, city_of)).expect("write");
    db.flush().expect("flush");
    table.create_index("by_city", &["city"], IndexOptions::default()).expect("index");
    let city = city_of(1).expect("a city");
    let matching = (0..5_000).filter(|&i| city_of(i) == city_of(1)).count() as u64;
    let eq = || IndexPredicate::Eq(vec![Some(KeyValue::Str(&city))]);
    let read = |f: &dyn Fn()| {
        let before = db.stats();
        f();
        let after = db.stats();
        (after.index_entries_read - before.index_entries_read, after.table_rows_read - before.table_rows_read)
    };
    let lookup = || {
        assert_eq!(
            table.lookup("by_city", eq(), LookupOptions::default()).expect("lookup").num_rows() as u64,
            matching
        );
    };
    assert_eq!(read(&lookup), (matching, matching));
    let covering = || {
        let opts = LookupOptions::default().projection(Some(vec!["id".into(), "city".into()]));
        assert_eq!(table.lookup("by_city", eq(), opts).expect("lookup").num_rows() as u64, matching);
    };
    assert_eq!(read(&covering), (matching, 0));
    assert_eq!(read(&|| assert_eq!(table.count("by_city", eq()).expect("count"), matching)), (matching, 0));
    let full_scan = || {
        let n: usize =
            table.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch").num_rows()).sum();
        assert_eq!(n, 5_000);
    };
    assert_eq!(read(&full_scan), (0, 5_000));
}

#[test]
fn the_index_check_finds_entries_that_disagree_with_rows() {
    let fs = MemFs::new();
    let (db, table) = open(&fs);
    table.write(&rows(0..3000, city_of)).expect("write");
    table.create_index("by_city", &["city"], IndexOptions::default()).expect("index");
    table
        .create_index(
            "by_age",
            &["age", "city"],
            IndexOptions::default().unique(false).include(vec!["price".into()]),
        )
        .expect("index");
    // Rows in SSTs and in the memtable, overwritten and deleted ones too.
    db.flush().expect("flush");
    table.write(&rows(2000..2500, |i| city_of(i + 1))).expect("overwrite");
    let consistent = |db: &Db| {
        let table = db.table("t").expect("table");
        basalt::inspect::check_indexes(&table)
            .expect("check")
            .into_iter()
            .map(|c| (c.index, c.rows, c.entries, c.consistent))
            .collect::<Vec<_>>()
    };
    assert_eq!(consistent(&db), [("by_city".into(), 3000, 3000, true), ("by_age".into(), 3000, 3000, true)]);
    // A change whose index entries were not written: same counts, other
    // entries.
    basalt::testing::skip_index_upkeep(&db, true);
    table.write(&rows(10..11, |_| Some("elsewhere".into()))).expect("write");
    let found = consistent(&db);
    assert!(found.iter().all(|(_, rows, entries, ok)| rows == entries && !ok), "{found:?}");
    // A row added without entries: the counts differ.
    table.write(&rows(5000..5001, city_of)).expect("write");
    let found = consistent(&db);
    assert!(found.iter().all(|(_, rows, entries, ok)| *rows == entries + 1 && !ok), "{found:?}");
}

/// `create_index` over rows whose entries straddle `key_bytes_max`: it
/// either fails with `InvalidArgument` and leaves no index, or succeeds
/// and then every indexed row can still be rewritten (the second outside
/// review: an index built over an entry upkeep would refuse froze its row).
#[test]
fn index_creation_over_rows_at_the_size_limits_is_all_or_nothing() {
    for seed in 0..24_u64 {
        let key_max = 40 + (seed as usize * 7) % 60;
        let fs = MemFs::new();
        let db = Db::open("/db", Options::default().fs(Arc::new(fs)).key_bytes_max(key_max)).expect("open");
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
        ]));
        let t = db.create_table("t", schema.clone(), &["id"], TableOptions::default()).expect("table");
        let batch = |rows: &[(i64, String, i64)]| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str()))),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
                ],
            )
            .expect("batch")
        };
        // Lengths from well inside to just past what an entry may take.
        let rows: Vec<(i64, String, i64)> = (0..20)
            .map(|i| (i, "s".repeat(((seed as usize + i as usize * 5) % (key_max + 4)).max(1)), 0))
            .collect();
        t.write(&batch(&rows)).expect("rows within the row limits");
        if seed % 3 == 0 {
            db.flush().expect("flush");
        }
        let created = t.create_index("by_s", &["s"], IndexOptions::default().include(vec!["n".into()]));
        match created {
            Err(Error::InvalidArgument(_)) => {
                assert!(t.indexes().is_empty(), "seed {seed}: a refused index stays");
                t.write(&batch(&rows)).expect("writes go on after the refusal");
            }
            Err(e) => panic!("seed {seed}: create_index failed with an untyped error: {e}"),
            Ok(()) => {
                let bumped: Vec<_> = rows.iter().map(|(id, s, n)| (*id, s.clone(), n + 1)).collect();
                t.write(&batch(&bumped))
                    .unwrap_or_else(|e| panic!("seed {seed}: an indexed row is frozen: {e}"));
                for check in basalt::inspect::check_indexes(&t).expect("check") {
                    assert!(check.consistent, "seed {seed}: {check:?}");
                }
            }
        }
    }
}

/// The model of `reads_over_stacked_sources_see_every_overwrite_and_delete`:
/// id → (city, age).
type RowModel = std::collections::BTreeMap<i64, (Option<String>, i64)>;

fn write_rows(table: &Table, model: &mut RowModel, ids: &[i64], age: impl Fn(i64) -> i64) {
    let batch = rows(ids.iter().copied(), city_of);
    let ages: Vec<i64> = ids.iter().map(|&i| age(i)).collect();
    let mut columns = batch.columns().to_vec();
    columns[2] = Arc::new(Int64Array::from(ages.clone()));
    table.write(&RecordBatch::try_new(schema(), columns).expect("batch")).expect("write");
    for (&i, a) in ids.iter().zip(ages) {
        model.insert(i, (city_of(i), a));
    }
}

fn delete_rows(table: &Table, model: &mut RowModel, ids: &[i64]) {
    let keys = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(keys, vec![Arc::new(Int64Array::from(ids.to_vec()))]).expect("keys");
    table.delete(&batch).expect("delete");
    for i in ids {
        model.remove(i);
    }
}

/// Every read of `table` (row gets, `get_many`, index counts and lookups,
/// covering and not) against the model, as of `snapshot` where given.
fn check_reads(ctx: &str, table: &Table, model: &RowModel, snapshot: Option<&basalt::Snapshot>) {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    let row_of = |batch: &RecordBatch, r: usize| {
        let id = batch.column(0).as_primitive::<Int64Type>().value(r);
        let city = batch.column(1).as_string::<i32>();
        let city = city.is_valid(r).then(|| city.value(r).to_string());
        (id, city, batch.column(2).as_primitive::<Int64Type>().value(r))
    };
    if snapshot.is_none() {
        let ids: Vec<i64> = (-5..3100).rev().collect();
        let got = table
            .get_many(
                &RecordBatch::try_new(
                    Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
                    vec![Arc::new(Int64Array::from(ids.clone()))],
                )
                .expect("keys"),
            )
            .expect("get_many");
        let want: Vec<_> =
            ids.iter().filter_map(|i| model.get(i).map(|(c, a)| (*i, c.clone(), *a))).collect();
        let got: Vec<_> = (0..got.num_rows()).map(|r| row_of(&got, r)).collect();
        assert_eq!(got, want, "{ctx}: get_many in the order asked");
    }
    for id in (-2..3100).step_by(7) {
        let opts = basalt::ReadOptions::default().snapshot(snapshot);
        let got = table.get_opt(&[KeyValue::I64(id)], &opts).expect("get");
        let want = model.get(&id).map(|(c, a)| (id, c.clone(), *a));
        assert_eq!(got.map(|b| row_of(&b, 0)), want, "{ctx}: get {id}");
    }
    for age in -47..47 {
        let mut want: Vec<_> =
            model.iter().filter(|(_, (_, a))| *a == age).map(|(i, (c, a))| (*i, c.clone(), *a)).collect();
        want.sort_by_key(|r| r.0);
        let pred = || IndexPredicate::Eq(vec![Some(KeyValue::I64(age))]);
        let count = table.count_opt("by_age", pred(), snapshot).expect("count");
        assert_eq!(count, want.len() as u64, "{ctx}: count of age {age}");
        let all =
            table.lookup("by_age", pred(), LookupOptions::default().snapshot(snapshot)).expect("lookup");
        let got: Vec<_> = (0..all.num_rows()).map(|r| row_of(&all, r)).collect();
        assert_eq!(got, want, "{ctx}: lookup of age {age}");
        let covering =
            LookupOptions::default().snapshot(snapshot).projection(Some(vec!["id".into(), "age".into()]));
        let ids = table.lookup("by_age", pred(), covering).expect("covering lookup");
        let ids: Vec<i64> = ids.column(0).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(ids, want.iter().map(|r| r.0).collect::<Vec<_>>(), "{ctx}: covering lookup of age {age}");
    }
    let range = || {
        IndexPredicate::Range(
            std::ops::Bound::Excluded(vec![Some(KeyValue::I64(-30))]),
            std::ops::Bound::Included(vec![Some(KeyValue::I64(20))]),
        )
    };
    let want = model.values().filter(|(_, a)| (-29..=20).contains(a)).count() as u64;
    assert_eq!(table.count_opt("by_age", range(), snapshot).expect("count"), want, "{ctx}: range count");
}

/// Index reads that take whole stretches of an SST block at once (counts,
/// lookups) and row reads straight from a block's buffers, over every
/// source a tree can have at once: the deepest level, an L0 file with
/// overwrites that move rows to other index values and deletes, a
/// memtable with more of both, and a snapshot from before the last ones.
/// A stretch that ignored a newer source (a moved entry, a delete) or a
/// row read from the wrong version would count or return a stale row.
#[test]
fn reads_over_stacked_sources_see_every_overwrite_and_delete() {
    let fs = MemFs::new();
    let opts = Options::default().fs(Arc::new(fs.clone())).memtable_bytes_max(4 << 20).auto_compaction(false);
    let db = Db::open("/db", opts).expect("open");
    let table = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    table.create_index("by_age", &["age"], IndexOptions::default()).expect("index");
    let mut model = RowModel::new();
    let all: Vec<i64> = (0..3000).collect();
    write_rows(&table, &mut model, &all, |i| i % 90 - 45);
    table.compact().expect("compact");
    check_reads("one run", &table, &model, None);

    // An L0 file: every 7th row moves to another age, every 11th is deleted.
    let moved: Vec<i64> = (0..3000).step_by(7).collect();
    write_rows(&table, &mut model, &moved, |i| (i % 90 - 45 + 1 + i % 3).min(46));
    delete_rows(&table, &mut model, &(5..3000).step_by(11).collect::<Vec<_>>());
    db.flush().expect("flush");
    check_reads("a run and an L0 file", &table, &model, None);

    let snapshot = db.snapshot();
    let at_snapshot = model.clone();
    // The memtable: more moves, deletes, and rows back from the dead.
    write_rows(&table, &mut model, &(3..3000).step_by(13).collect::<Vec<_>>(), |i| -(i % 47));
    delete_rows(&table, &mut model, &(1..3000).step_by(17).collect::<Vec<_>>());
    write_rows(&table, &mut model, &(5..3000).step_by(22).collect::<Vec<_>>(), |i| i % 90 - 45);
    check_reads("a run, an L0 file and a memtable", &table, &model, None);
    check_reads("a snapshot before the memtable", &table, &at_snapshot, Some(&snapshot));
    db.flush().expect("flush");
    check_reads("a run and two L0 files", &table, &model, None);
    table.compact().expect("compact");
    check_reads("compacted", &table, &model, None);
}

/// `index_compression` compresses the index trees' blocks, and only
/// theirs: the same rows and index take fewer bytes with it, the table's
/// files are the same size, and every lookup answers the same.
#[test]
fn index_compression_shrinks_the_index_alone_and_changes_no_answer() {
    use basalt::Compression;
    const ROWS: i64 = 30_000;
    let sst_bytes = |dir: &std::path::Path| -> u64 {
        std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry"))
            .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
            .map(|e| e.metadata().expect("size").len())
            .sum()
    };
    let mut measured = Vec::new();
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options::default().index_compression(compression);
        let db = Db::open(dir.path(), opts).expect("open");
        let table = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
        table.write(&rows(0..ROWS, city_of)).expect("write");
        db.flush().expect("flush");
        let table_bytes = sst_bytes(dir.path());
        table.create_index("by_city", &["city"], IndexOptions::default()).expect("index");
        let index_bytes = sst_bytes(dir.path()) - table_bytes;
        let answers: Vec<usize> = (0..50)
            .map(|c| {
                let city = format!("c\0{c}");
                let eq = IndexPredicate::Eq(vec![Some(KeyValue::Str(&city))]);
                table.lookup("by_city", eq, LookupOptions::default()).expect("lookup").num_rows()
            })
            .collect();
        assert_eq!(answers.iter().sum::<usize>() as i64, ROWS - (ROWS + 6) / 7, "{compression:?}");
        drop(table);
        db.close().expect("close");
        measured.push((table_bytes, index_bytes, answers));
    }
    let (plain, lz4) = (&measured[0], &measured[1]);
    assert_eq!(plain.0, lz4.0, "the table's files are not compressed");
    assert!(lz4.1 * 2 < plain.1, "index bytes: {} compressed, {} plain", lz4.1, plain.1);
    assert_eq!(plain.2, lz4.2, "the same answers");
}

/// `lookup_with` hands out the rows `lookup` returns, in the same (index)
/// order, whether it fetches them one by one (a few rows) or in primary-
/// key order into one buffer (many: 64 or more), with rows in memtables
/// and SSTs, nulls, rewrites, deletes, reversed and limited.
#[test]
fn lookup_with_gives_lookups_rows_in_index_order_few_or_many() {
    let fs = MemFs::new();
    let (db, t) = open(&fs);
    t.create_index("by_age", &["age"], IndexOptions::default()).expect("index");
    // Every age holds about 3000 / 90 rows; some written twice, some
    // deleted, half of them flushed to SSTs before the rest are written.
    t.write(&rows(0..1500, |i| (i % 5 != 0).then(|| format!("c{i}")))).expect("write");
    db.flush().expect("flush");
    t.write(&rows(1500..3000, |i| (i % 5 != 0).then(|| format!("c{i}")))).expect("write");
    t.write(&rows((0..3000).step_by(7), |i| Some(format!("again{i}")))).expect("rewrite");
    t.delete(&key_batch((0..3000).step_by(11))).expect("delete");
    for (predicate, reverse, limit) in [
        (IndexPredicate::Eq(vec![Some(KeyValue::I64(-3))]), false, None),
        (IndexPredicate::Eq(vec![Some(KeyValue::I64(7))]), true, Some(5)),
        (
            IndexPredicate::Range(
                std::ops::Bound::Included(vec![Some(KeyValue::I64(-10))]),
                std::ops::Bound::Excluded(vec![Some(KeyValue::I64(10))]),
            ),
            false,
            None,
        ),
        (IndexPredicate::Prefix(vec![Some(KeyValue::I64(44))]), true, Some(100)),
    ] {
        let opts = LookupOptions::default().reverse(reverse).limit(limit);
        let want = t.lookup("by_age", predicate.clone(), opts.clone()).expect("lookup");
        let mut got: Vec<(i64, Option<String>, i64)> = Vec::new();
        let n = t
            .lookup_with("by_age", predicate.clone(), opts, |row| {
                got.push((
                    row.i64(0)?.expect("id"),
                    row.str(1)?.map(str::to_string),
                    row.i64(2)?.expect("age"),
                ));
                Ok::<_, Error>(())
            })
            .expect("lookup_with");
        let ids = want.column(0).as_any().downcast_ref::<Int64Array>().expect("ids");
        let cities = want.column(1).as_any().downcast_ref::<StringArray>().expect("cities");
        let ages = want.column(2).as_any().downcast_ref::<Int64Array>().expect("ages");
        let want: Vec<(i64, Option<String>, i64)> = (0..want.num_rows())
            .map(|i| {
                let city = (!arrow_array::Array::is_null(cities, i)).then(|| cities.value(i).to_string());
                (ids.value(i), city, ages.value(i))
            })
            .collect();
        assert_eq!(n, want.len(), "{predicate:?}");
        assert_eq!(got, want, "{predicate:?}");
    }
    // The range lookup above fetched many rows, the equalities few.
    let many = t
        .lookup_with(
            "by_age",
            IndexPredicate::Range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
            LookupOptions::default(),
            |_| Ok::<_, Error>(()),
        )
        .expect("all");
    assert!(many > 2000, "{many} rows");
}

/// A float of an index's key is kept in its canonical form only (`-0.0`
/// as `0.0`): a covering `lookup_with` does not hand it out from the
/// entry (reading it is an error, the column was not read), and a lookup
/// that asks for it reads the row's exact bits.
#[test]
fn lookup_with_never_hands_out_a_float_of_the_key_from_the_entry() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("x", DataType::Float64, true),
        Field::new("y", DataType::Int64, false),
    ]));
    let db = Db::open("/db", Options::default().fs(Arc::new(MemFs::new()))).expect("open");
    let t = db.create_table("t", schema.clone(), &["id"], TableOptions::default()).expect("table");
    t.create_index("by_yx", &["y", "x"], IndexOptions::default()).expect("index");
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![1, 2])),
        Arc::new(arrow_array::Float64Array::from(vec![-0.0, f64::from_bits(0x7ff8_0000_dead_beef)])),
        Arc::new(Int64Array::from(vec![5, 6])),
    ];
    t.write(&RecordBatch::try_new(schema, columns).expect("batch")).expect("write");
    for flushed in [false, true] {
        if flushed {
            db.flush().expect("flush");
        }
        for (y, x, bits) in [(5, 0.0, (-0.0f64).to_bits()), (6, f64::NAN, 0x7ff8_0000_dead_beef)] {
            let eq = || IndexPredicate::Eq(vec![Some(KeyValue::I64(y)), Some(KeyValue::F64(x))]);
            let covering = LookupOptions::default().projection(Some(vec!["id".into(), "y".into()]));
            let n = t
                .lookup_with("by_yx", eq(), covering, |row| {
                    assert_eq!(row.i64(2)?, Some(y));
                    assert!(matches!(row.f64(1), Err(Error::InvalidArgument(_))), "{:?}", row.f64(1));
                    Ok::<_, Error>(())
                })
                .expect("covering");
            assert_eq!(n, 1, "flushed {flushed}");
            let n = t
                .lookup_with("by_yx", eq(), LookupOptions::default(), |row| {
                    assert_eq!(row.f64(1)?.map(f64::to_bits), Some(bits), "the row's exact bits");
                    Ok::<_, Error>(())
                })
                .expect("whole rows");
            assert_eq!(n, 1, "flushed {flushed}");
        }
    }
}
