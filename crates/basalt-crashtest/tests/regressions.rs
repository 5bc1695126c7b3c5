//! Regression tests for bugs the reliability harness found, each named
//! after its bug. An ignored one is a bug still open: it fails until the
//! fix, then loses its `ignore`.

use std::panic::AssertUnwindSafe;
use std::path::Path;

fn regression_input(target: &str, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions").join(target).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Peak resident memory of this process, in KiB (Linux).
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Found by the `arrow_schema` fuzz target: `basalt::inspect::schema_from_ipc`
/// hands its bytes (a table schema kept in the MANIFEST) to arrow-ipc's
/// `StreamReader`, which panics on malformed input (`unimplemented!("Type
/// NONE not supported")`, `Option::unwrap()` on a missing field) instead
/// of returning an error. A damaged schema must be `Error::Corruption`.
/// Fixed: streams are framed and their metadata verified before arrow-ipc
/// sees them, and a panic inside it becomes corruption.
#[test]
fn arrow_schema_decoding_panics_on_malformed_ipc() {
    let input = regression_input("arrow_schema", "type_none");
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| basalt::inspect::schema_from_ipc(&input)))
        .unwrap_or_else(|_| panic!("schema_from_ipc panicked on a malformed schema"));
    match result {
        Ok(_) => panic!("a malformed schema decoded"),
        Err(e) => assert!(e.is_corruption(), "expected Corruption, got {e}"),
    }
}

/// Found by the `arrow_schema` fuzz target: a schema whose IPC length
/// prefix claims about 1 GB makes arrow-ipc allocate and zero that much
/// before it notices the input is 43 bytes long. Decoders must bound their
/// allocations by the bytes they were given. Fixed: every length is
/// checked against the input before arrow-ipc reads it.
#[test]
fn arrow_schema_decoding_allocates_the_claimed_length() {
    let mut input = vec![0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x38];
    input.extend_from_slice(&[0u8; 35]);
    let before = peak_rss_kib();
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| basalt::inspect::schema_from_ipc(&input)));
    let grown_mib = (peak_rss_kib().saturating_sub(before)) / 1024;
    assert!(grown_mib < 64, "decoding 43 bytes raised peak memory by {grown_mib} MiB");
}

/// Found by the `arrow_schema` fuzz target: arrow-ipc reads a time zone
/// of `""` back as none, so a schema with `Timestamp(_, Some(""))` does not
/// survive the IPC round trip. `create_table` keeps the schema as read back
/// (`Timestamp(s)`), then refuses batches of the very schema the table was
/// created with: `SchemaMismatch("column at has type Timestamp(s, \"\"),
/// the table Timestamp(s)")`. Either refuse the empty time zone at
/// `create_table`, or treat `Some("")` as `None` when checking batches.
/// Fixed: batch checks treat an empty time zone as none.
#[test]
fn empty_time_zone_table_refuses_its_own_batches() {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, TimestampSecondArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    let fs = basalt::testing::MemFs::new();
    let options = basalt::Options::default().fs(Arc::new(fs));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("at", DataType::Timestamp(TimeUnit::Second, Some("".into())), true),
    ]));
    let at = TimestampSecondArray::from(vec![Some(1_700_000_000)]).with_timezone("");
    let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![1])), Arc::new(at)];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    let db = basalt::Db::open("/db", options.clone()).expect("open");
    let table = db.create_table("t", schema, &["id"], basalt::TableOptions::default()).expect("create");
    table.write(&batch).expect("a batch of the schema the table was created with");
    drop(table);
    db.close().expect("close");
    let db = basalt::Db::open("/db", options).expect("reopen");
    let table = db.table("t").expect("table");
    table.write(&batch).expect("the same batch after a reopen");
}

/// Found by the `ops` fuzz target (`fuzz/regressions/ops/is_null_literal_of_two_values`):
/// a scan filter `IS NULL` or `IS NOT NULL` whose literal holds two values
/// panicked in `Filter::evaluate` as soon as the scan had rows to filter
/// (`Scalar::new` asserts a single value). `Filter::check` skips the
/// literal of these ops and `CmpOp::IsNull` documents it as ignored; the
/// scan now ignores it.
#[test]
fn is_null_filter_with_a_literal_of_two_values_panics() {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use basalt::{CmpOp, Filter, Predicate, ScanOptions};
    let options = basalt::Options::default().fs(Arc::new(basalt::testing::MemFs::new()));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int64, true),
    ]));
    let columns: Vec<ArrayRef> =
        vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(Int64Array::from(vec![Some(7), None]))];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    let db = basalt::Db::open("/db", options).expect("open");
    let table = db.create_table("t", schema, &["id"], basalt::TableOptions::default()).expect("create");
    table.write(&batch).expect("write");
    let literal: ArrayRef = Arc::new(Int64Array::from(vec![0, 0]));
    let filter = Filter::all(vec![Predicate::new("v", CmpOp::IsNull, literal)]);
    let scanned = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let scan = table.scan(ScanOptions::default().filter(Some(filter)))?;
        scan.map(|b| b.map(|b| b.num_rows())).sum::<basalt::Result<usize>>()
    }))
    .unwrap_or_else(|_| panic!("a scan filtering IS NULL with a literal of two values panicked"));
    if let Ok(rows) = scanned {
        assert_eq!(rows, 1, "IS NULL (its literal ignored) keeps the one row whose v is null");
    }
}
