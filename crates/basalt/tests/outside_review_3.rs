//! Third outside review (engine at 83e3cbf): optimistic transactions,
//! overlay scans, schema evolution. Every test here FAILS on that commit:
//! each is a confirmed defect, and its asserts state the behaviour the
//! documented contract asks for (they pass once the defect is fixed).
//! Public API only (`basalt::…`); no `testing`/`inspect` item is used.
//!
//! To run:
//! `cargo test -p basalt --test outside_review_3 -- --test-threads=1`
//!
//! 1. `a_transaction_reads_its_own_write_in_the_order_the_commit_applies_it`
//!    (deterministic).
//! 2. `listing_indexes_while_a_column_change_lands_neither_panics_nor_misnames`
//!    (a race between two threads; it failed in each of the 12 runs tried,
//!    with 8-16 bad listings per run of 240 column changes).
//! 3. `an_overlay_of_another_databases_transaction_is_refused`
//!    (deterministic).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow_array::{Array, ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{Db, IndexOptions, KeyValue, Options, ScanOptions, Table, TableOptions, WriteBatch};

fn open(dir: &std::path::Path) -> Db {
    Db::open(dir, Options::default()).expect("open")
}

/// A row of the default keyspace's table face (`db.table("default")`:
/// `key` and `value`, both binary).
fn face_row(face: &Table, key: &[u8], value: &[u8]) -> RecordBatch {
    RecordBatch::try_new(
        face.schema(),
        vec![
            Arc::new(BinaryArray::from(vec![key])) as ArrayRef,
            Arc::new(BinaryArray::from(vec![value])) as ArrayRef,
        ],
    )
    .expect("face row")
}

/// Contract (`Transaction` rustdoc; docs/architecture.md, "Transactions"):
/// a transaction reads "as of the transaction's start (its snapshot) with
/// its own writes on top", and `Transaction::write` adds a `WriteBatch`
/// whose later write of a key wins ("In batch order: a key written twice
/// keeps its later write", transaction.rs:299); the commit logs the batch
/// in order, so the later write is what the database then holds.
///
/// Observed: a batch that writes key `k` of the default keyspace first
/// through its table face (`WriteBatch::put_table(&db.table("default"))`)
/// and then through the key-value face (`WriteBatch::put`) commits the
/// second value, but before the commit the transaction reads the first
/// one, through `get`, `get_table` and an overlay scan alike: it reads a
/// state that neither its snapshot plus its writes, nor the commit, ever
/// had. (The same with a face delete followed by a key-value put: the
/// transaction reads "deleted", the commit writes the value.)
///
/// Suspected cause: `Transaction::write` (db/transaction.rs:275-300) builds
/// the own-write map from all key-value entries of the batch first and
/// then `.chain(batch.table_writes())` (line 281), so a table row of a
/// key replaces a key-value entry of the same tree and key that comes
/// after it in the batch; the commit (db/write.rs:693, `insert_entries`)
/// applies the entries in batch order.
#[test]
fn a_transaction_reads_its_own_write_in_the_order_the_commit_applies_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    let face = db.table("default").expect("the default keyspace's table face");
    let mut batch = WriteBatch::new();
    batch.put_table(&face, &face_row(&face, b"k", b"first, through the table face")).expect("put_table");
    batch.put(b"k", b"second, through the key-value face");
    let mut tx = db.transaction();
    tx.write(batch).expect("write");

    let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
    let own_get = tx.get(b"k").expect("get").map(|v| text(&v));
    let own_row = tx
        .get_table(&face, &[KeyValue::Bytes(b"k")])
        .expect("get_table")
        .map(|row| text(row.column(1).as_any().downcast_ref::<BinaryArray>().expect("binary").value(0)));
    let own_scan: Vec<String> = face
        .scan(ScanOptions::default().snapshot(Some(tx.snapshot())).overlay(Some(tx.overlay(&face))))
        .expect("scan")
        .flat_map(|b| {
            let b = b.expect("batch");
            let v = b.column(1).as_any().downcast_ref::<BinaryArray>().expect("binary").clone();
            (0..v.len()).map(|i| text(v.value(i))).collect::<Vec<_>>()
        })
        .collect();
    tx.commit().expect("commit");

    let committed = db.get(b"k").expect("get").map(|v| text(&v));
    assert_eq!(
        committed.as_deref(),
        Some("second, through the key-value face"),
        "the commit applies the batch in order"
    );
    assert_eq!(own_get, committed, "Transaction::get before the commit");
    assert_eq!(own_row, committed, "Transaction::get_table before the commit");
    assert_eq!(own_scan, committed.into_iter().collect::<Vec<_>>(), "overlay scan before the commit");
}

/// Contract (docs/architecture.md, "Schema evolution"): "Reads take the
/// layout from the super version they read, never from the handle";
/// `Table::indexes` lists each index with the names of its columns.
/// Columns may be changed while other threads use the table.
///
/// Observed: `Table::indexes` called while `drop_column` runs on another
/// thread (the index's own column is not touched: columns before it are
/// dropped, so it moves left) now and then panics with "index out of
/// bounds: the len is N but the index is N", or lists the index under
/// the column that follows its own (`["h"]` instead of `["g"]`). It
/// reproduced in every run tried, 1-4 times per 40 column changes.
///
/// Suspected cause: `Table::indexes` (db/index/mod.rs:122-136) takes the
/// catalog (the index's column positions) from one load of the state
/// (line 123) and the schema from a second one, `self.schema()` (line
/// 124), then looks each position up in that schema (line 125): a change
/// installed between the two loads pairs the positions of one version
/// with the schema of the next.
#[test]
fn listing_indexes_while_a_column_change_lands_neither_panics_nor_misnames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    let fillers = 40;
    let mut bad: Vec<String> = Vec::new();
    for round in 0..6 {
        // The indexed column `g` after 40 columns that are dropped one by
        // one; in odd rounds a column `h` follows it.
        let mut fields = vec![Field::new("id", DataType::Int64, false)];
        fields.extend((0..fillers).map(|i| Field::new(format!("f{i}"), DataType::Int64, true)));
        fields.push(Field::new("g", DataType::Int64, true));
        if round % 2 == 1 {
            fields.push(Field::new("h", DataType::Int64, true));
        }
        let t = db
            .create_table(
                &format!("t{round}"),
                Arc::new(Schema::new(fields)),
                &["id"],
                TableOptions::default(),
            )
            .expect("create");
        t.create_index("by_g", &["g"], IndexOptions::default()).expect("index");
        let stop = Arc::new(AtomicBool::new(false));
        let lister = {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.indexes())) {
                        Ok(list) => {
                            let columns: Vec<String> = list.iter().flat_map(|i| i.columns.clone()).collect();
                            if columns != ["g"] {
                                seen.push(format!("listed by_g on {columns:?}"));
                            }
                        }
                        Err(panic) => {
                            let message = panic
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                                .unwrap_or_default();
                            seen.push(format!("panicked: {message}"));
                        }
                    }
                }
                seen
            })
        };
        for i in 0..fillers {
            t.drop_column(&format!("f{i}")).expect("drop_column");
        }
        stop.store(true, Ordering::Relaxed);
        let seen = lister.join().expect("lister");
        bad.extend(seen.into_iter().map(|s| format!("round {round}: {s}")));
        // After the changes, the listing is right again.
        assert_eq!(t.indexes()[0].columns, ["g"]);
    }
    assert!(
        bad.is_empty(),
        "{} bad listings of Table::indexes while columns moved, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(4)]
    );
}

fn accounts_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("owner", DataType::Utf8, true),
    ]))
}

fn accounts(ids: &[i64], owners: &[&str]) -> RecordBatch {
    RecordBatch::try_new(
        accounts_schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
            Arc::new(StringArray::from(owners.to_vec())) as ArrayRef,
        ],
    )
    .expect("rows")
}

/// Contract: handles of another database are refused with a typed error
/// (docs/RELIABILITY.md, finding class 8: "a handle of a closed (or
/// another) database gets an error"); every other `Transaction` method
/// given a table of another database refuses it ("the keyspace or table
/// belongs to another database", transaction.rs:340), and an overlay used
/// on another table than its own is refused ("the overlay is of another
/// table", transaction.rs:423-428; `tests/transactions.rs` checks it).
///
/// Observed: database A's transaction wrote row 5 of A's table `t` (not
/// committed). Database B has a table `t` too, holding row 1. A scan of
/// B's `t` given `tx.overlay(&a_t)` returns 2 rows: B's row 1 and A's
/// uncommitted row 5. `tx.overlay(&b_t)` (a table of another database) is
/// not refused either, and merges the same row into B's scan.
///
/// Suspected cause: `Transaction::overlay` (db/transaction.rs:130) does not
/// call `check_same_db`, and `TableOverlay::rows_in` (line 423) compares
/// tree ids only; tree ids are per database (both tables get the same one
/// in two new databases), so another database's writes pass the check.
#[test]
fn an_overlay_of_another_databases_transaction_is_refused() {
    let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let (a, b) = (open(dir_a.path()), open(dir_b.path()));
    let a_t = a.create_table("t", accounts_schema(), &["id"], TableOptions::default()).expect("a.t");
    let b_t = b.create_table("t", accounts_schema(), &["id"], TableOptions::default()).expect("b.t");
    b_t.write(&accounts(&[1], &["b's own row"])).expect("write b");
    let mut tx = a.transaction();
    tx.put_table(&a_t, &accounts(&[5], &["a's uncommitted row"])).expect("put");

    let rows_of = |overlay| -> Option<usize> {
        let scan = b_t.scan(ScanOptions::default().overlay(Some(overlay))).ok()?;
        scan.map(|batch| batch.map(|b| b.num_rows())).sum::<basalt::Result<usize>>().ok()
    };
    let with_a_overlay = rows_of(tx.overlay(&a_t));
    let with_overlay_for_b = rows_of(tx.overlay(&b_t));
    assert_eq!(
        (with_a_overlay, with_overlay_for_b),
        (None, None),
        "B's table scanned with A's transaction's writes is refused (Some(n): n rows came back)"
    );
}
