//! A database directory written before trees had kinds in the MANIFEST
//! (`tests/fixtures/catalog-v1`, made by the engine at df04066: 220
//! key-value puts and a delete, a table `people` of 110 rows, a table
//! `gone` created, written and dropped; flushed and compacted, with 20
//! puts and 10 rows left in the WAL) still opens with all its data, and
//! keeps it after the open rewrote the MANIFEST in today's format.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use basalt::{Db, KeyValue, Options, ScanOptions};

fn copy_fixture(to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/catalog-v1");
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("fixture") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

fn check(db: &Db) {
    assert_eq!(db.tables(), vec!["default".to_string(), "people".to_string()]);
    assert_eq!(db.keyspaces(), vec!["default".to_string()]);
    for i in 0..220u32 {
        let got = db.get(format!("kv{i:04}")).expect("get");
        let want = (i != 7).then(|| format!("value {i}"));
        assert_eq!(got.as_deref(), want.as_deref().map(str::as_bytes), "kv{i:04}");
    }
    let people = db.table("people").expect("people");
    let rows: Vec<_> =
        people.scan(ScanOptions::default()).expect("scan").collect::<basalt::Result<_>>().expect("rows");
    let ids: Vec<i64> =
        rows.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
    assert_eq!(ids, (-50..60).collect::<Vec<_>>());
    let row = people.get(&[KeyValue::I64(12)]).expect("get").expect("row 12");
    assert_eq!(row.column(1).as_string::<i32>().value(0), "p12");
    let null_row = people.get(&[KeyValue::I64(15)]).expect("get").expect("row 15");
    assert!(null_row.column(1).is_null(0));
    assert!(db.table("gone").is_err(), "the dropped table stays dropped");
}

#[test]
fn a_directory_from_before_tree_kinds_opens_with_all_its_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_fixture(dir.path());
    let db = Db::open(dir.path(), Options::default()).expect("open the old directory");
    check(&db);
    db.put("new", "write").expect("put");
    db.close().expect("close");
    let db = Db::open(dir.path(), Options::default()).expect("reopen in today's format");
    check(&db);
    assert_eq!(db.get("new").expect("get").as_deref(), Some(&b"write"[..]));
}
