//! The `basalt` binary end to end (`assert_cmd`): loading every input
//! format, every read command in every output format, loads that fail
//! and leave the table as it was, damage found by `check`, and the exit
//! codes docs/cli.md promises.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use assert_cmd::Command;
use predicates::prelude::*;

const CSV: &str = "\
id,name,score,city
3,carol,7.5,Lyon
1,alice,10,Paris
2,bob,-2.25,NA
5,eve,0,Oslo
4,dave,12,Paris
";

/// The rows of CSV in key order, as `scan --format csv` prints them
/// (Arrow's CSV writer; null as the empty field).
const SCANNED: &str = "\
id,name,score,city
1,alice,10.0,Paris
2,bob,-2.25,
3,carol,7.5,Lyon
4,dave,12.0,Paris
5,eve,0.0,Oslo
";

fn basalt() -> Command {
    Command::cargo_bin("basalt").expect("the basalt binary is built")
}

fn batch() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
        Field::new("city", DataType::Utf8, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![3, 1, 2, 5, 4])),
        Arc::new(StringArray::from(vec!["carol", "alice", "bob", "eve", "dave"])),
        Arc::new(Float64Array::from(vec![7.5, 10.0, -2.25, 0.0, 12.0])),
        Arc::new(StringArray::from(vec![Some("Lyon"), Some("Paris"), None, Some("Oslo"), Some("Paris")])),
    ];
    RecordBatch::try_new(schema, columns).expect("batch")
}

/// The same five rows in every input format, in `dir`.
fn write_inputs(dir: &Path) -> Vec<PathBuf> {
    let csv = dir.join("people.csv");
    std::fs::write(&csv, CSV).expect("csv");
    let b = batch();
    let parquet = dir.join("people.parquet");
    let mut w =
        parquet::arrow::ArrowWriter::try_new(File::create(&parquet).expect("create"), b.schema(), None)
            .expect("parquet writer");
    w.write(&b).expect("write");
    w.close().expect("close");
    let arrow = dir.join("people.arrow");
    let mut w = arrow_ipc::writer::FileWriter::try_new(File::create(&arrow).expect("create"), &b.schema())
        .expect("ipc writer");
    w.write(&b).expect("write");
    w.finish().expect("finish");
    let stream = dir.join("people.arrows");
    let mut w = arrow_ipc::writer::StreamWriter::try_new(File::create(&stream).expect("create"), &b.schema())
        .expect("ipc stream writer");
    w.write(&b).expect("write");
    w.finish().expect("finish");
    let jsonl = dir.join("people.jsonl");
    let mut w = arrow_json::LineDelimitedWriter::new(File::create(&jsonl).expect("create"));
    w.write(&b).expect("write");
    w.finish().expect("finish");
    vec![csv, parquet, arrow, stream, jsonl]
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Creates the database if needed and loads `file` into a new table keyed by `id`.
fn create_from(db: &Path, table: &str, file: &Path) {
    basalt()
        .args(["load", "--create"])
        .arg(db)
        .arg(table)
        .arg(file)
        .args(["--primary-key", "id"])
        .assert()
        .success();
}

/// The rows of `tables --format json`, by table name.
fn tables_json(db: &Path) -> serde_json::Map<String, serde_json::Value> {
    let out = stdout_of(basalt().arg("tables").arg(db).args(["--format", "json"]));
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(&out).expect("JSON");
    rows.into_iter()
        .map(|r| (r["table"].as_str().expect("a name").to_owned(), serde_json::Value::Object(r)))
        .collect()
}

/// A number of a `tables --format json` row.
fn number(row: &serde_json::Value, column: &str) -> u64 {
    row[column].as_u64().unwrap_or_else(|| panic!("{column} of {row}"))
}

/// The bytes of the SSTs in a database's directory.
fn sst_bytes_in(db: &Path) -> u64 {
    std::fs::read_dir(db)
        .expect("the database directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .map(|p| std::fs::metadata(&p).expect("metadata").len())
        .sum()
}

/// `load`, `tables` and `stats` tell the bytes on disk of each table and of
/// each index, and their figures agree with each other and with the files.
#[test]
fn bytes_on_disk_per_table_and_index_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let csv = dir.path().join("big.csv");
    let lines = (0..3_000).map(|i| format!("{i},name-{i}-{},city-{}\n", i * 7919 % 1000, i % 40));
    let text: String = std::iter::once("id,name,city\n".to_owned()).chain(lines).collect();
    std::fs::write(&csv, &text).expect("csv");
    let summary = stdout_of(basalt().args(["load", "--create"]).arg(&db).arg("big").arg(&csv).args([
        "--primary-key",
        "id",
        "--index",
        "by_city=city",
        "--index",
        "by_name=name",
    ]));
    let tables = tables_json(&db);
    let big = &tables["big"];
    let (rows, indexes) = (number(big, "bytes"), number(big, "index_bytes"));
    assert!(rows > 0 && indexes > 0, "{big}");
    // The table is every SST of the database: rows and indexes add up.
    assert_eq!(rows + indexes, sst_bytes_in(&db), "{big}");
    let shown = |n: u64| indicatif::BinaryBytes(n).to_string();
    let input = shown(text.len() as u64);
    let ratio = format!("{:.2}x the {input} input", (rows + indexes) as f64 / text.len() as f64);
    assert!(
        summary.contains(&format!(
            "; the table takes {} ({ratio}): rows {}, index by_city ",
            shown(rows + indexes),
            shown(rows)
        )),
        "{summary}"
    );
    assert!(summary.contains(", index by_name "), "{summary}");
    let listed = big["indexes"].as_str().expect("indexes");
    assert!(listed.starts_with("by_city(city): ") && listed.contains("; by_name(name): "), "{listed}");
    let stats = stdout_of(basalt().arg("stats").arg(&db));
    assert!(
        stats.contains(&format!("tables on disk  {} (rows and indexes)", shown(rows + indexes))),
        "{stats}"
    );
    // The per-table section follows "tables on disk" (the tree listing
    // above it names the same trees, with file counts).
    let section = stats.split("tables on disk").nth(1).unwrap_or_default();
    let line = |label: &str| section.lines().find(|l| l.trim_start().starts_with(label)).map(str::to_owned);
    assert!(line("big ").is_some_and(|l| l.ends_with(&shown(rows + indexes))), "{stats}");
    assert!(line("rows ").is_some_and(|l| l.ends_with(&shown(rows))), "{stats}");
    assert!(line("index by_city").is_some() && line("index by_name").is_some(), "{stats}");
    // Dropping an index takes its bytes out of the table's, and only its.
    basalt().arg("drop-index").arg(&db).args(["big", "by_name"]).assert().success();
    let after = tables_json(&db);
    let big = &after["big"];
    assert_eq!(number(big, "bytes"), rows, "{big}");
    let left = number(big, "index_bytes");
    assert!(left > 0 && left < indexes, "{big}");
    assert!(!big["indexes"].as_str().expect("indexes").contains("by_name"), "{big}");
    // Into an existing table, no ratio: the input is not all it holds.
    let more = dir.path().join("more.csv");
    std::fs::write(&more, "id,name,city\n5000,zed,Oslo\n").expect("csv");
    let summary = stdout_of(&mut load_into(&db, "big", &more));
    assert!(summary.contains("; the table takes ") && !summary.contains(" input)"), "{summary}");
    assert!(summary.contains(": rows ") && summary.contains(", index by_city "), "{summary}");
}

/// `basalt load DB TABLE FILE`, to add options and assertions to.
fn load_into(db: &Path, table: &str, file: &Path) -> Command {
    let mut cmd = basalt();
    cmd.arg("load").arg(db).arg(table).arg(file);
    cmd
}

fn scan_csv(db: &Path, table: &str) -> String {
    stdout_of(basalt().args(["scan"]).arg(db).args([table, "--format", "csv"]))
}

/// A database holding the people table, loaded from CSV.
fn people() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let csv = dir.path().join("people.csv");
    std::fs::write(&csv, CSV).expect("csv");
    basalt()
        .args(["load", "--create"])
        .arg(&db)
        .arg("people")
        .arg(&csv)
        .args(["--primary-key", "id", "--null", "NA", "--index", "by_city=city"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("loaded 5 rows into people from 1 file"));
    (dir, db)
}

#[test]
fn every_input_format_loads_the_same_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    for (i, file) in write_inputs(dir.path()).iter().enumerate() {
        let table = format!("t{i}");
        let mut load = basalt();
        load.args(["load", "--create"]).arg(&db).arg(&table).arg(file).args([
            "--primary-key",
            "id",
            "--null",
            "NA",
        ]);
        let out = load.output().expect("runs");
        assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        // Not a terminal: no progress bar, only the summary.
        assert!(out.stderr.is_empty(), "{}: stderr {}", file.display(), String::from_utf8_lossy(&out.stderr));
        let summary = String::from_utf8_lossy(&out.stdout);
        assert!(summary.starts_with(&format!("loaded 5 rows into {table}")), "{summary}");
        assert!(summary.contains(" rows/s") && summary.contains("; the table takes "), "{summary}");
        assert_eq!(summary.lines().count(), 1, "{summary}");
        assert_eq!(scan_csv(&db, &table), SCANNED, "{}", file.display());
    }
}

#[test]
fn load_without_a_key_numbers_rows_and_continues_the_numbering() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let csv = dir.path().join("people.csv");
    std::fs::write(&csv, CSV).expect("csv");
    for _ in 0..2 {
        basalt()
            .args(["load", "--create"])
            .arg(&db)
            .arg("p")
            .arg(&csv)
            .args(["--null", "NA"])
            .assert()
            .success();
    }
    let ids =
        stdout_of(basalt().arg("scan").arg(&db).args(["p", "--columns", "row_id,id", "--format", "csv"]));
    assert_eq!(ids, "row_id,id\n0,3\n1,1\n2,2\n3,5\n4,4\n5,3\n6,1\n7,2\n8,5\n9,4\n");
}

#[test]
fn reads_in_every_output_format() {
    let (dir, db) = people();
    let get =
        |format: &str| stdout_of(basalt().arg("get").arg(&db).args(["people", "2", "4", "--format", format]));
    assert_eq!(get("csv"), "id,name,score,city\n2,bob,-2.25,\n4,dave,12.0,Paris\n");
    assert_eq!(
        get("jsonl"),
        "{\"id\":2,\"name\":\"bob\",\"score\":-2.25}\n{\"id\":4,\"name\":\"dave\",\"score\":12.0,\"city\":\"Paris\"}\n"
    );
    assert_eq!(
        get("json"),
        "[{\"id\":2,\"name\":\"bob\",\"score\":-2.25},{\"id\":4,\"name\":\"dave\",\"score\":12.0,\"city\":\"Paris\"}]"
    );
    let table = get("table");
    assert!(table.contains("| id | name | score | city  |"), "{table}");
    assert!(table.contains("| 4  | dave | 12.0  | Paris |"), "{table}");
    // Binary formats into files, read back with Arrow's readers.
    let arrow = dir.path().join("out.arrow");
    basalt()
        .arg("get")
        .arg(&db)
        .args(["people", "2", "4", "--format", "arrow", "--output"])
        .arg(&arrow)
        .assert()
        .success();
    let reader =
        arrow_ipc::reader::FileReader::try_new(File::open(&arrow).expect("open"), None).expect("ipc");
    let rows: usize = reader.map(|b| b.expect("valid").num_rows()).sum();
    assert_eq!(rows, 2);
    let parquet = dir.path().join("out.parquet");
    basalt()
        .arg("scan")
        .arg(&db)
        .args(["people", "--where", "score > 0 and city = 'Paris'", "--format", "parquet", "--output"])
        .arg(&parquet)
        .assert()
        .success();
    let rows: usize = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        File::open(&parquet).expect("open"),
    )
    .expect("parquet")
    .build()
    .expect("reader")
    .map(|b| b.expect("batch").num_rows())
    .sum();
    assert_eq!(rows, 2);
    // Binary output to a pipe is fine; the pipe here is assert_cmd's.
    basalt().arg("get").arg(&db).args(["people", "1", "--format", "parquet"]).assert().success();
}

#[test]
fn scans_ranges_projections_filters_limits_and_reverse() {
    let (_dir, db) = people();
    let scan = |args: &[&str]| {
        stdout_of(basalt().arg("scan").arg(&db).arg("people").args(args).args(["--format", "csv"]))
    };
    assert_eq!(
        scan(&["--from", "2", "--to", "4", "--columns", "name,id"]),
        "name,id\nbob,2\ncarol,3\ndave,4\n"
    );
    assert_eq!(scan(&["--where", "city = 'Paris'", "--columns", "id"]), "id\n1\n4\n");
    assert_eq!(scan(&["--where", "city is null", "--columns", "id"]), "id\n2\n");
    assert_eq!(scan(&["--where", "score >= 7.5 and name != 'dave'", "--columns", "id"]), "id\n1\n3\n");
    assert_eq!(scan(&["--limit", "2", "--columns", "id"]), "id\n1\n2\n");
    assert_eq!(scan(&["--reverse", "--limit", "3", "--columns", "id"]), "id\n5\n4\n3\n");
    assert_eq!(scan(&["--reverse", "--from", "2", "--to", "3", "--columns", "id"]), "id\n3\n2\n");
    assert_eq!(scan(&["--where", "score > 100", "--columns", "id"]), "id\n");
}

#[test]
fn queries_through_an_index() {
    let (_dir, db) = people();
    let query = |args: &[&str]| {
        stdout_of(basalt().arg("query").arg(&db).args(["people", "--index", "by_city"]).args(args))
    };
    assert_eq!(query(&["--eq", "Paris", "--count"]), "2\n");
    assert_eq!(
        query(&["--eq", "Paris", "--columns", "id,name", "--format", "csv"]),
        "id,name\n1,alice\n4,dave\n"
    );
    assert_eq!(query(&["--range", "L", "P", "--columns", "city", "--format", "csv"]), "city\nLyon\nOslo\n");
    assert_eq!(query(&["--prefix", "Oslo", "--columns", "id", "--format", "jsonl"]), "{\"id\":5}\n");
    assert_eq!(
        query(&["--eq", "Paris", "--reverse", "--limit", "1", "--columns", "id", "--format", "csv"]),
        "id\n4\n"
    );
}

#[test]
fn sql_statements_and_the_shell() {
    let (_dir, db) = people();
    let out = stdout_of(basalt().arg("sql").arg(&db).args([
        "SELECT city, count(*) AS n FROM people WHERE city IS NOT NULL GROUP BY city ORDER BY city",
        "--format",
        "csv",
    ]));
    assert_eq!(out, "city,n\nLyon,1\nOslo,1\nParis,2\n");
    // The shell reads statements (over lines, up to `;`) and dot-commands
    // from stdin when it is not a terminal.
    let home = tempfile::tempdir().expect("home");
    let out = stdout_of(
        basalt()
            .arg("sql")
            .arg(&db)
            .env("HOME", home.path())
            .write_stdin(".tables\nSELECT max(score)\n  AS top FROM people;\n.mode csv\nSELECT 40 + 2 AS answer;\nSELECT 7 AS last"),
    );
    assert!(out.contains("people"), "{out}");
    assert!(out.contains("| top  |") && out.contains("| 12.0 |"), "{out}");
    assert!(out.contains("answer\n42\n"), "{out}");
    assert!(out.ends_with("last\n7\n"), "a last statement without `;` runs: {out}");
    assert!(!out.contains(".help"), "no banner for a script: {out}");
    // A script with a failing statement or command says so in its exit code.
    basalt()
        .arg("sql")
        .arg(&db)
        .env("HOME", home.path())
        .write_stdin("SELECT nope FROM people;\n.nope\nSELECT 1;\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("2 statements of the script failed"));
    // A transaction block: ROLLBACK undoes the INSERT between, COMMIT
    // applies it; a block left open at the end is rolled back, and said so.
    let script = |end: &str| {
        let mut cmd = basalt();
        cmd.arg("sql")
            .arg(&db)
            .env("HOME", home.path())
            .write_stdin(format!("BEGIN;\nINSERT INTO people VALUES (9, 'zed', 1.0, 'Rome');\n{end}"));
        cmd
    };
    let find_zed = || {
        stdout_of(basalt().arg("sql").arg(&db).args([
            "SELECT name FROM people WHERE id = 9",
            "--format",
            "csv",
        ]))
    };
    script("ROLLBACK;\n").assert().success();
    assert_eq!(find_zed(), "name\n", "rolled back");
    script("").assert().success().stderr(predicate::str::contains("the open transaction was rolled back"));
    assert_eq!(find_zed(), "name\n", "never committed");
    // A failed statement fails the block: its COMMIT rolls back and says so.
    script("INSERT INTO people VALUES (NULL, 'nobody', 1.0, 'Rome');\nCOMMIT;\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("a statement failed").and(predicate::str::contains("rolled back")));
    assert_eq!(find_zed(), "name\n", "nothing of the failed block");
    script("COMMIT;\n").assert().success();
    assert_eq!(find_zed(), "name\nzed\n", "committed");
}

#[test]
fn manage_tables_and_indexes() {
    let (dir, db) = people();
    let tables = stdout_of(basalt().arg("tables").arg(&db).args(["--format", "csv"]));
    assert!(
        tables.starts_with("table,columns,primary_key,indexes,rows_stored,bytes,index_bytes\n"),
        "{tables}"
    );
    assert!(
        tables.contains("people,\"id Int64, name Utf8, score Float64, city Utf8\",id,by_city(city): "),
        "{tables}"
    );
    basalt()
        .arg("create-index")
        .arg(&db)
        .args(["people", "by_name", "name", "--unique", "--include", "score"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("created index by_name on people(name)"));
    let out = stdout_of(
        basalt()
            .arg("query")
            .arg(&db)
            .args(["people", "--index", "by_name", "--eq", "eve", "--format", "csv"]),
    );
    assert_eq!(out, "id,name,score,city\n5,eve,0.0,Oslo\n");
    // A unique index the rows violate is refused, and nothing is created.
    basalt().arg("create-index").arg(&db).args(["people", "by_city_u", "city", "--unique"]).assert().code(7);
    basalt().arg("drop-index").arg(&db).args(["people", "by_name"]).assert().success();
    basalt().arg("query").arg(&db).args(["people", "--index", "by_name", "--eq", "eve"]).assert().code(2);
    basalt().arg("stats").arg(&db).assert().success().stdout(predicate::str::contains("space amplification"));
    basalt().arg("compact").arg(&db).assert().success();
    // Once compacted, each tree's files: the table's and its index's.
    let stats = stdout_of(basalt().arg("stats").arg(&db));
    assert!(stats.contains("\ntree            files   bytes\n  by_city "), "{stats}");
    assert!(stats.contains("\n  people "), "{stats}");
    basalt().arg("compact").arg(&db).arg("people").assert().success();
    // Export, then load the export: the same table.
    for ext in ["parquet", "csv", "arrow", "jsonl"] {
        let file = dir.path().join(format!("export.{ext}"));
        basalt().arg("export").arg(&db).arg("people").arg(&file).assert().success();
        let copy = format!("copy_{ext}");
        basalt().arg("load").arg(&db).arg(&copy).arg(&file).args(["--primary-key", "id"]).assert().success();
        assert_eq!(scan_csv(&db, &copy), SCANNED, "{ext}");
    }
    basalt().arg("drop-table").arg(&db).arg("copy_csv").assert().success();
    basalt()
        .arg("scan")
        .arg(&db)
        .arg("copy_csv")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no table copy_csv"));
}

#[test]
fn a_bad_row_stops_the_load_and_leaves_the_table_as_it_was() {
    let (dir, db) = people();
    let before = scan_csv(&db, "people");
    // Rows 1 and 2 change existing rows and add one; row 5 is bad. With
    // two rows per batch, two batches are written before the bad one.
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        "id,name,score,city\n1,ALICE,1,Rome\n9,zed,3,Rome\n2,BOB,2,Rome\n10,yan,4,Rome\n11,xi,lots,Rome\n",
    )
    .expect("write");
    load_into(&db, "people", &bad)
        .args(["--batch-rows", "2"])
        .assert()
        .code(7)
        .stderr(predicate::str::contains("bad.csv row 5: column score: \"lots\" is not a Float64"))
        .stderr(predicate::str::contains("as it was before the load"));
    assert_eq!(scan_csv(&db, "people"), before);
    // The index was put back too.
    let rome = stdout_of(
        basalt().arg("query").arg(&db).args(["people", "--index", "by_city", "--eq", "Rome", "--count"]),
    );
    assert_eq!(rome, "0\n");
    basalt().arg("check").arg(&db).assert().success();
    // A null key: the same.
    let null_key = dir.path().join("null_key.csv");
    std::fs::write(&null_key, "id,name,score,city\n7,gus,1,Rome\n,nobody,1,Rome\n").expect("write");
    load_into(&db, "people", &null_key)
        .assert()
        .code(7)
        .stderr(predicate::str::contains("row 2: column id (a key column) is null"));
    assert_eq!(scan_csv(&db, "people"), before);
    // Into a new table: the table is not created.
    basalt().arg("load").arg(&db).arg("fresh").arg(&null_key).args(["--primary-key", "id"]).assert().code(7);
    let tables = stdout_of(basalt().arg("tables").arg(&db).args(["--format", "csv"]));
    assert!(!tables.contains("fresh"), "{tables}");
    // --skip-bad-rows loads the rest and counts what it left out.
    load_into(&db, "people", &bad)
        .arg("--skip-bad-rows")
        .assert()
        .success()
        .stdout(predicate::str::contains("loaded 4 rows").and(predicate::str::contains("1 bad rows skipped")))
        .stderr(predicate::str::contains("skipped"));
    let rome = stdout_of(
        basalt().arg("query").arg(&db).args(["people", "--index", "by_city", "--eq", "Rome", "--count"]),
    );
    assert_eq!(rome, "4\n");
}

#[test]
fn check_names_a_damaged_file() {
    let (_dir, db) = people();
    basalt().arg("check").arg(&db).assert().success().stdout(predicate::str::starts_with("ok: "));
    basalt().arg("compact").arg(&db).assert().success();
    // Opening deletes the files compaction made obsolete: what is left is
    // what the MANIFEST lists.
    basalt().arg("tables").arg(&db).assert().success();
    let sst = std::fs::read_dir(&db)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .expect("an SST after compaction");
    basalt().arg("dump-sst").arg(&sst).assert().success().stdout(predicate::str::contains("entries"));
    basalt().arg("dump-manifest").arg(&db).assert().success().stdout(predicate::str::contains("edits"));
    let mut bytes = std::fs::read(&sst).expect("read");
    // A byte of the first data block.
    bytes[20] ^= 0x55;
    std::fs::write(&sst, &bytes).expect("write");
    let name = sst.file_name().expect("name").to_string_lossy().into_owned();
    basalt()
        .arg("check")
        .arg(&db)
        .assert()
        .code(6)
        .stdout(predicate::str::contains("damage:").and(predicate::str::contains(name.as_str())))
        .stderr(predicate::str::contains(name.as_str()).and(predicate::str::contains("offset")));
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let (_dir, db) = people();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_basalt"))
        .arg("scan")
        .arg(&db)
        .args(["people", "--format", "csv"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Close the read end before the child writes.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn dump_wal_prints_the_records() {
    let (_dir, db) = people();
    let wal = std::fs::read_dir(&db)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .expect("a WAL");
    basalt().arg("dump-wal").arg(&wal).assert().success().stdout(predicate::str::contains("records"));
}

#[test]
fn exit_codes_are_as_documented() {
    let (dir, db) = people();
    let missing = dir.path().join("nothing-here");
    basalt()
        .arg("get")
        .arg(&missing)
        .args(["t", "1"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no Basalt database").and(predicate::str::contains("--create")));
    assert!(!missing.exists(), "a read must not create a database");
    // Locked: this process holds the database.
    let held = basalt::Db::open(&db, basalt::Options::default()).expect("open");
    basalt()
        .arg("get")
        .arg(&db)
        .args(["people", "1"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("locked"));
    drop(held);
    // Bad arguments: clap's own, and ours.
    basalt().arg("get").assert().code(2);
    basalt().args(["scan", "--no-such-flag"]).assert().code(2);
    basalt().arg("get").arg(&db).args(["people", "not-a-number"]).assert().code(2);
    basalt().arg("get").arg(&db).args(["nope", "1"]).assert().code(2);
    basalt()
        .arg("scan")
        .arg(&db)
        .args(["people", "--columns", "id,nope"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no column nope"));
    // A bad --where.
    for bad in ["score > 1 or id = 2", "(id = 1)", "nope = 1", "score >", "score > 'x'"] {
        basalt()
            .arg("scan")
            .arg(&db)
            .args(["people", "--where", bad])
            .assert()
            .code(5)
            .stderr(predicate::str::starts_with("basalt: --where"));
    }
    // SQL errors are bad arguments, in one line.
    basalt()
        .arg("sql")
        .arg(&db)
        .arg("SELEC nonsense")
        .assert()
        .code(2)
        .stderr(predicate::function(|s: &str| s.lines().count() == 1));
    // Help has examples.
    basalt().arg("--help").assert().success().stdout(predicate::str::contains("Examples:"));
    basalt().args(["load", "--help"]).assert().success().stdout(predicate::str::contains("Examples:"));
}

/// `basalt tables` fits the width it is given (COLUMNS, or the terminal's),
/// wrapping column and index lists between items (a name longer than its
/// share keeps its line: 80 columns do not hold this table, 112 do — seven
/// cells, two with a 21-letter name whole); `--wide` and the machine
/// formats keep one line per table.
#[test]
fn tables_fit_the_terminal_unless_wide() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let names: Vec<String> = (0..12).map(|i| format!("measurement_number_{i}")).collect();
    let csv = dir.path().join("wide.csv");
    std::fs::write(&csv, format!("id,{}\n1,{}\n", names.join(","), ["2.5"; 12].join(","))).expect("csv");
    create_from(&db, "readings", &csv);
    basalt()
        .arg("create-index")
        .arg(&db)
        .args(["readings", "by_first_two", "measurement_number_0", "measurement_number_1"])
        .assert()
        .success();
    for width in [112, 140] {
        let out = stdout_of(basalt().env("COLUMNS", width.to_string()).arg("tables").arg(&db));
        let longest = out.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(longest <= width, "wider than {width}:\n{out}");
        // Every column is there, each name whole on one line.
        for name in &names {
            assert!(out.lines().any(|l| l.contains(&format!("{name} "))), "{name} missing:\n{out}");
        }
    }
    let wide = stdout_of(basalt().env("COLUMNS", "80").arg("tables").arg(&db).arg("--wide"));
    assert_eq!(wide.lines().count(), 5, "a header, a row and three rules:\n{wide}");
    let csv_out = stdout_of(basalt().env("COLUMNS", "80").arg("tables").arg(&db).args(["--format", "csv"]));
    assert_eq!(csv_out.lines().count(), 2, "{csv_out}");
}

/// ISO timestamps with `Z` or an offset are instants: the new column is a
/// UTC timestamp holding each one, not the naive wall-clock time of UTC.
#[test]
fn timestamps_with_an_offset_load_as_utc_instants() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let csv = dir.path().join("events.csv");
    std::fs::write(
        &csv,
        "id,at\n1,2024-01-02T03:04:05Z\n2,2024-01-02T03:04:05+02:00\n3,2024-01-02T03:04:05-0130\n",
    )
    .expect("csv");
    create_from(&db, "events", &csv);
    let tables = stdout_of(basalt().arg("tables").arg(&db).args(["--format", "csv"]));
    assert!(tables.contains(r#"events,"id Int64, at Timestamp(s, ""UTC"")""#), "{tables}");
    let out = stdout_of(
        basalt()
            .arg("sql")
            .arg(&db)
            .arg(
                "SELECT id FROM events WHERE at = TIMESTAMP '2024-01-02T03:04:05Z' \
           OR at = TIMESTAMP '2024-01-02T01:04:05Z' OR at = TIMESTAMP '2024-01-02T04:34:05Z' ORDER BY id",
            )
            .args(["--format", "csv"]),
    );
    assert_eq!(out, "id\n1\n2\n3\n");
    // Naive timestamps stay naive; a mix is read as UTC, and said so.
    let naive = dir.path().join("naive.csv");
    std::fs::write(&naive, "id,at\n1,2024-01-02T03:04:05\n").expect("csv");
    create_from(&db, "naive", &naive);
    let mixed = dir.path().join("mixed.csv");
    std::fs::write(&mixed, "id,at\n1,2024-01-02T03:04:05Z\n2,2024-01-02T03:04:05\n").expect("csv");
    basalt()
        .args(["load", "--create"])
        .arg(&db)
        .arg("mixed")
        .arg(&mixed)
        .args(["--primary-key", "id"])
        .assert()
        .success()
        .stderr(predicate::str::contains("1 of its first 2 values have no offset and are read as UTC"));
    let tables = stdout_of(basalt().arg("tables").arg(&db).args(["--format", "csv"]));
    assert!(tables.contains("naive,\"id Int64, at Timestamp(s)\""), "{tables}");
    assert!(tables.contains("mixed,\"id Int64, at Timestamp(s, \"\"UTC\"\")\""), "{tables}");
}

/// The mistakes a new user makes first, each told as docs/cli.md says:
/// its exit code, a message naming what is wrong, and the data as it was.
#[test]
fn a_new_users_mistakes_are_told_as_documented() {
    let (dir, db) = people();
    let before = scan_csv(&db, "people");
    // SQL that fails while it runs is a SQL error: exit 2, one line.
    for statement in ["SELECT CAST(name AS INT) FROM people", "SELECT id / (id - id) FROM people"] {
        basalt()
            .arg("sql")
            .arg(&db)
            .arg(statement)
            .assert()
            .code(2)
            .stderr(predicate::function(|s: &str| s.lines().count() == 1));
    }
    // A null key through INSERT … VALUES names the key column, not
    // DataFusion's name for the VALUES column.
    basalt()
        .arg("sql")
        .arg(&db)
        .arg("INSERT INTO people VALUES (NULL, 'nobody', 1.0, 'Rome')")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("id").and(predicate::str::contains("column1").not()));
    // A ragged CSV line is a bad row: exit 7, the table as it was.
    let ragged = dir.path().join("ragged.csv");
    std::fs::write(&ragged, "id,name,score,city\n1,ALICE,1,Rome\n9,zed,3,Rome\n10,yan,4\n").expect("write");
    load_into(&db, "people", &ragged).args(["--batch-rows", "1"]).assert().code(7).stderr(
        predicate::str::contains("ragged.csv").and(predicate::str::contains("as it was before the load")),
    );
    assert_eq!(scan_csv(&db, "people"), before);
    // A stray value inside the inference window: the column is text, and
    // the load says so.
    let stray = dir.path().join("stray.csv");
    std::fs::write(&stray, "id,score\n1,1.5\n2,2\n3,-3e2\n4,4\n5,lots\n").expect("write");
    load_into(&db, "stray", &stray)
        .args(["--primary-key", "id"])
        .assert()
        .success()
        .stderr(predicate::str::contains("note: column score is loaded as text: 4 of its first 5 values"))
        .stderr(predicate::str::contains("row 5 holds \"lots\""));
    // No note where the text is text.
    load_into(&db, "names", &dir.path().join("people.csv"))
        .args(["--primary-key", "id", "--null", "NA"])
        .assert()
        .success()
        .stderr(predicate::str::contains("note").not());
    // A primary key given twice: the summary says what the table holds.
    let repeated = dir.path().join("repeated.csv");
    std::fs::write(&repeated, "id,name\n1,a\n2,b\n1,c\n3,d\n2,e\n").expect("write");
    load_into(&db, "repeated", &repeated)
        .args(["--primary-key", "id"])
        .assert()
        .success()
        .stdout(predicate::str::contains("loaded 5 rows into repeated from 1 file"))
        .stdout(predicate::str::contains(
            "2 rows repeated the key of an earlier row and replaced it: the table holds 3 rows",
        ));
    assert_eq!(scan_csv(&db, "repeated"), "id,name\n1,c\n2,e\n3,d\n");
    // A JSON array is not JSON lines: refused, saying how to convert it.
    let array = dir.path().join("array.json");
    std::fs::write(&array, "[{\"id\": 1, \"name\": \"a\"},\n {\"id\": 2, \"name\": \"b\"}]\n")
        .expect("write");
    load_into(&db, "array", &array)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("holds a JSON array").and(predicate::str::contains("jq -c")));
    let tables = stdout_of(basalt().arg("tables").arg(&db).args(["--format", "csv"]));
    assert!(!tables.contains("array"), "{tables}");
    // `--timer` prints the statement's time on stderr.
    basalt()
        .arg("sql")
        .arg(&db)
        .args(["SELECT count(*) FROM people", "--timer"])
        .assert()
        .success()
        .stderr(predicate::str::starts_with("time: "));
}

#[test]
fn a_second_load_appends_and_upserts() {
    let (dir, db) = people();
    let more = dir.path().join("more.jsonl");
    std::fs::write(
        &more,
        "{\"id\": 1, \"name\": \"ALICE\", \"score\": 11}\n{\"id\": 6, \"name\": \"frank\"}\n",
    )
    .expect("write");
    basalt().arg("load").arg(&db).arg("people").arg(&more).assert().success();
    let out = stdout_of(basalt().arg("get").arg(&db).args(["people", "1", "6", "--format", "csv"]));
    assert_eq!(out, "id,name,score,city\n1,ALICE,11.0,\n6,frank,,\n");
    let count = |v: &str| {
        stdout_of(basalt().arg("query").arg(&db).args(["people", "--index", "by_city", "--eq", v, "--count"]))
    };
    // The index followed the upsert: alice left Paris.
    assert_eq!(count("Paris"), "1\n");
    // Columns the table lacks are refused.
    let extra = dir.path().join("extra.csv");
    std::fs::write(&extra, "id,shoe\n1,42\n").expect("write");
    load_into(&db, "people", &extra).assert().code(2).stderr(predicate::str::contains("shoe"));
}

#[test]
fn bench_runs_the_suite_built_beside_it_or_says_how_to_build_it() {
    let suite = Path::new(env!("CARGO_BIN_EXE_basalt")).with_file_name("basalt-bench");
    if suite.is_file() {
        basalt().args(["bench", "--help"]).assert().success().stdout(predicate::str::contains("quick"));
        basalt().args(["bench", "no-such-workload"]).assert().code(2);
    } else {
        basalt()
            .args(["bench", "quick"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains("cargo build").and(predicate::str::contains("-p basalt-bench")));
    }
}

#[test]
fn review_cases_negative_values_strict_json_null_columns_lossy_casts_and_no_stray_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let csv = dir.path().join("n.csv");
    std::fs::write(&csv, "id,v\n-5,1\n-1,2\n3,3\n").expect("write");
    create_from(&db, "n", &csv);
    // Negative values are values, not flags.
    assert_eq!(stdout_of(basalt().arg("get").arg(&db).args(["n", "-5", "--format", "csv"])), "id,v\n-5,1\n");
    assert_eq!(
        stdout_of(basalt().arg("scan").arg(&db).args(["n", "--from", "-2", "--to", "3", "--format", "csv"])),
        "id,v\n-1,2\n3,3\n"
    );
    // A JSON key the inference never saw is an error, not a dropped column.
    let json = dir.path().join("late.jsonl");
    let mut text = "{\"id\": 0}\n".repeat(20);
    text.push_str("{\"id\": 99, \"surprise\": 1}\n");
    std::fs::write(&json, text).expect("write");
    load_into(&db, "late", &json).args(["--infer-rows", "5", "--primary-key", "id"]).assert().failure();
    // A Parquet column of nulls only (a Null-typed column) loads.
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("note", DataType::Null, true),
        Field::new("ratio", DataType::Float64, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(arrow_array::NullArray::new(2)),
            Arc::new(Float64Array::from(vec![1.0, 1.7])),
        ],
    )
    .expect("batch");
    let parquet = dir.path().join("nulls.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(File::create(&parquet).expect("create"), schema, None)
        .expect("w");
    w.write(&batch).expect("write");
    w.close().expect("close");
    basalt().arg("load").arg(&db).arg("nulls").arg(&parquet).args(["--primary-key", "id"]).assert().success();
    assert_eq!(
        stdout_of(basalt().arg("scan").arg(&db).args(["nulls", "--format", "csv"])),
        "id,note,ratio\n1,,1.0\n2,,1.7\n"
    );
    // A float into an integer column must fit exactly: 1.7 does not.
    let schema_file = dir.path().join("schema.txt");
    std::fs::write(&schema_file, "id: Int64\nnote: Utf8\nratio: Int64\n").expect("write");
    load_into(&db, "ints", &parquet)
        .args(["--primary-key", "id", "--schema"])
        .arg(&schema_file)
        .assert()
        .code(7)
        .stderr(predicate::str::contains("row 2: column ratio: 1.7 does not fit Int64 exactly"));
    // Bad arguments with --create leave no database behind.
    let stray = dir.path().join("stray");
    basalt()
        .args(["load", "--create"])
        .arg(&stray)
        .arg("t")
        .arg(dir.path().join("x.unknown"))
        .assert()
        .code(2);
    basalt()
        .args(["load", "--create"])
        .arg(&stray)
        .arg("t")
        .arg(&csv)
        .args(["--batch-rows", "0"])
        .assert()
        .code(2);
    basalt()
        .args(["load", "--create"])
        .arg(&stray)
        .arg("t")
        .arg(&csv)
        .args(["--batch-rows", "999999999999"])
        .assert()
        .code(2);
    assert!(!stray.exists());
}

#[test]
fn a_failed_load_into_a_table_with_a_unique_index_is_undone_newest_batch_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let users = dir.path().join("users.csv");
    std::fs::write(&users, "id,email\n1,a@x\n3,c@x\n").expect("write");
    create_from(&db, "u", &users);
    basalt().arg("create-index").arg(&db).args(["u", "by_email", "email", "--unique"]).assert().success();
    let before = scan_csv(&db, "u");
    // Row 1 frees a@x, row 2 takes it, row 3 is bad: undoing batch 1
    // before batch 2 would put a@x back while row 2 holds it.
    let change = dir.path().join("change.csv");
    std::fs::write(&change, "id,email\n1,b@x\n2,a@x\nx,d@x\n").expect("write");
    load_into(&db, "u", &change)
        .args(["--batch-rows", "1"])
        .assert()
        .code(7)
        .stderr(predicate::str::contains("as it was before the load"));
    assert_eq!(scan_csv(&db, "u"), before);
    basalt().arg("check").arg(&db).assert().success();
}

#[test]
fn history_changes_and_reads_as_of_a_past_point() {
    let (_dir, db) = people();
    let sql = |statement: &str| stdout_of(basalt().arg("sql").arg(&db).args([statement, "--format", "csv"]));
    sql("ALTER TABLE people SET (history = '1 hour')");
    let seqno = |out: String| out.lines().nth(1).and_then(|l| l.parse::<u64>().ok()).expect("a seqno");
    let before = seqno(sql("SELECT max(_seqno) AS s FROM history('people', 1)"));
    sql("UPDATE people SET city = 'Rome' WHERE id = 1");
    sql("DELETE FROM people WHERE id = 2");
    let get = |args: &[&str]| stdout_of(basalt().arg("get").arg(&db).arg("people").args(args));
    assert_eq!(get(&["1", "--format", "csv"]), "id,name,score,city\n1,alice,10.0,Rome\n");
    let then = get(&["1", "2", "--as-of", &before.to_string(), "--format", "csv"]);
    assert_eq!(then, "id,name,score,city\n1,alice,10.0,Paris\n2,bob,-2.25,\n");
    let history = stdout_of(basalt().arg("history").arg(&db).args(["people", "1", "--format", "csv"]));
    let cities: Vec<&str> = history.lines().skip(1).map(|l| l.rsplit(',').next().unwrap_or("")).collect();
    assert_eq!(cities, vec!["Rome", "Paris"], "{history}");
    let changes = stdout_of(basalt().arg("changes").arg(&db).args([
        "people",
        "--since",
        &before.to_string(),
        "--format",
        "csv",
    ]));
    let ops: Vec<&str> = changes.lines().skip(1).map(|l| l.split(',').next().unwrap_or("")).collect();
    assert_eq!(ops, vec!["upsert", "delete"], "{changes}");
    let tables = stdout_of(basalt().arg("tables").arg(&db).args(["--format", "csv"]));
    assert!(tables.contains("keep 1h"), "{tables}");
    let stats = stdout_of(basalt().arg("stats").arg(&db));
    assert!(stats.contains("1 trees keep history"), "{stats}");
    // Outside the window: refused, with the oldest point named.
    let out = basalt().arg("get").arg(&db).args(["people", "1", "--as-of", "0"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("readable as of seqno"), "{out:?}");
}

#[test]
fn delete_range_deletes_a_key_range_and_asks_for_one() {
    let (_tmp, db) = people();
    let out =
        stdout_of(basalt().arg("delete-range").arg(&db).arg("people").args(["--from", "2", "--to", "4"]));
    assert!(out.contains("deleted 3 rows"), "{out}");
    let rows = scan_csv(&db, "people");
    assert_eq!(rows, "id,name,score,city\n1,alice,10.0,Paris\n5,eve,0.0,Oslo\n");
    // Without --from, --to or --all it deletes nothing: a usage error.
    basalt().arg("delete-range").arg(&db).arg("people").assert().failure().code(2);
    assert_eq!(scan_csv(&db, "people"), rows);
    stdout_of(basalt().arg("delete-range").arg(&db).arg("people").arg("--all"));
    assert_eq!(scan_csv(&db, "people"), "id,name,score,city\n");
}

#[test]
fn ttl_prints_sets_and_turns_off_a_tables_time_to_live() {
    let (_tmp, db) = people();
    assert_eq!(stdout_of(basalt().arg("ttl").arg(&db).arg("people")).trim(), "off");
    let out = stdout_of(basalt().arg("ttl").arg(&db).args(["people", "90m"]));
    assert!(out.contains("time to live of people: 5400s"), "{out}");
    assert_eq!(stdout_of(basalt().arg("ttl").arg(&db).arg("people")).trim(), "5400s");
    // Rows written just now are an hour and a half from expiry.
    assert!(scan_csv(&db, "people").contains("alice"));
    for bad in ["0", "10x", "-5s", "soon"] {
        basalt().arg("ttl").arg(&db).args(["people", bad]).assert().failure().code(2);
    }
    stdout_of(basalt().arg("ttl").arg(&db).args(["people", "off"]));
    assert_eq!(stdout_of(basalt().arg("ttl").arg(&db).arg("people")).trim(), "off");
    // A keyspace.
    stdout_of(basalt().arg("ttl").arg(&db).args(["default", "2d", "--keyspace"]));
    assert_eq!(stdout_of(basalt().arg("ttl").arg(&db).args(["default", "--keyspace"])).trim(), "172800s");
}

/// `basalt load --zstd` stores the loaded rows zstd-compressed: the same
/// CSV takes fewer bytes and reads back the same.
#[test]
fn load_with_zstd_stores_fewer_bytes_and_the_same_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("t.csv");
    let lines = (0..5_000).map(|i| format!("{i},carrier-{},{}\n", i % 7, i * 31 % 1000));
    let text: String = std::iter::once("id,carrier,delay\n".to_owned()).chain(lines).collect();
    std::fs::write(&csv, &text).expect("csv");
    let mut sizes = Vec::new();
    let mut dumps = Vec::new();
    for zstd in [false, true] {
        let db = dir.path().join(format!("db-{zstd}"));
        let mut load = basalt();
        load.args(["load", "--create"]).arg(&db).arg("t").arg(&csv).args(["--primary-key", "id"]);
        if zstd {
            load.arg("--zstd");
        }
        load.assert().success();
        sizes.push(number(&tables_json(&db)["t"], "bytes"));
        dumps.push(stdout_of(basalt().arg("scan").arg(&db).arg("t").args(["--format", "csv"])));
    }
    assert!(sizes[1] < sizes[0], "bytes without and with --zstd: {sizes:?}");
    assert_eq!(dumps[0], dumps[1]);
    assert!(dumps[0].lines().count() > 5_000, "{}", &dumps[0][..200.min(dumps[0].len())]);
}

/// `basalt sql` over a sharded store's directory: one statement over its
/// table, read only; the shell is refused with a usage error.
#[test]
fn sql_runs_over_a_sharded_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("store");
    let store = basalt::ShardedStore::new(&store_dir, basalt::Options::default());
    let map = store
        .create("t", &batch().schema(), &["id"], vec![vec![basalt::OwnedKeyValue::I64(3)]])
        .expect("create");
    for (i, s) in map.shards().iter().enumerate() {
        let db = basalt::Db::open(store_dir.join(&s.path), basalt::Options::default()).expect("shard");
        let rows = batch();
        let ids = rows.column(0).as_any().downcast_ref::<Int64Array>().expect("ids");
        let mine: Vec<u32> = (0..rows.num_rows())
            .filter(|&r| map.shard_of(&[basalt::KeyValue::I64(ids.value(r))]).expect("route") == i)
            .map(|r| r as u32)
            .collect();
        let part = arrow_select::take::take_record_batch(&rows, &arrow_array::UInt32Array::from(mine))
            .expect("take");
        db.table("t").expect("t").write(&part).expect("write");
        db.flush().expect("flush");
        db.close().expect("close");
    }
    let out = stdout_of(basalt().args(["sql"]).arg(&store_dir).args([
        "SELECT count(*) AS n, min(id), max(id) FROM t",
        "--format",
        "csv",
    ]));
    assert!(out.contains("5,1,5"), "{out}");
    basalt().args(["sql"]).arg(&store_dir).assert().failure().code(2);
}
