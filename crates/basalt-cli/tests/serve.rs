//! `basalt serve` end to end: the real `psql` client (Debian's
//! postgresql-client; `.ci/run` installs it) against the binary, on
//! loopback, every step bounded in time.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use basalt::arrow_array::{BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use basalt::arrow_schema::{DataType, Field, Schema};
use basalt::{Db, IndexOptions, Options, TableOptions};

/// Longest any one step may take before the test fails (a debug build on a
/// busy two-core machine).
const STEP_LIMIT: Duration = Duration::from_mins(1);

/// The server, stopped with SIGKILL when a test fails before stopping it.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(db: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .arg("serve")
            .arg(db)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start basalt serve");
        let stdout = child.stdout.take().expect("stdout");
        let (lines, first_lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let line = first_lines.recv_timeout(STEP_LIMIT).expect("basalt serve printed no address");
        // "basalt: serving DB on postgres://127.0.0.1:PORT (…)"
        let port = line
            .split("postgres://127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        // Keep the rest of the output flowing (and visible on failure).
        thread::spawn(move || {
            while let Ok(line) = first_lines.recv() {
                println!("server: {line}");
            }
        });
        Server { child, port }
    }

    /// Runs `sql` through `psql -c`, unaligned and without headers.
    fn psql(&self, sql: &str) -> Psql {
        self.psql_with(&["-c", sql], None)
    }

    /// Feeds `script` to psql's standard input, as a user typing it.
    fn psql_script(&self, script: &str) -> Psql {
        self.psql_with(&[], Some(script))
    }

    fn psql_with(&self, args: &[&str], input: Option<&str>) -> Psql {
        let mut command = Command::new("psql");
        command
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "basalt", "-d", "basalt"])
            // No ~/.psqlrc, unaligned rows without header or footer, '|'
            // between fields, stop at the first error.
            .args(["-X", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1"])
            .args(args)
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => panic!(
                "cannot run psql ({e}): this test needs PostgreSQL's client \
                 (apt-get install postgresql-client; .ci/run installs it)"
            ),
        };
        if let Some(input) = input {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(input.as_bytes()).expect("write psql's input");
        }
        let output = wait_bounded(child, STEP_LIMIT);
        Psql {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// SIGTERM, then the exit status, bounded.
    fn stop(mut self) -> std::process::ExitStatus {
        let status =
            Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(started.elapsed() < STEP_LIMIT, "basalt serve did not stop on SIGTERM");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
struct Psql {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Psql {
    /// The rows (or command tags) printed, after checking psql succeeded.
    #[track_caller]
    fn ok(self) -> Vec<String> {
        assert_eq!(self.code, Some(0), "psql failed: {self:?}");
        self.stdout.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
    }

    /// The error psql printed, after checking it failed.
    #[track_caller]
    fn error(self) -> String {
        assert_ne!(self.code, Some(0), "psql should have failed: {self:?}");
        self.stderr
    }
}

fn wait_bounded(mut child: Child, limit: Duration) -> std::process::Output {
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!("psql ran past {limit:?}: {output:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// A table made with the engine's own calls before the server starts:
/// integer key, string, float with NULLs, boolean, and an index.
fn make_players(dir: &Path) {
    let db = Db::open(dir, Options::default()).expect("open");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
        Field::new("active", DataType::Boolean, true),
    ]));
    let table = db.create_table("players", schema.clone(), &["id"], TableOptions::default()).expect("create");
    let ids: Vec<i64> = (1..=1000).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("p{:04}", i % 100)).collect();
    let scores: Vec<Option<f64>> = ids.iter().map(|&i| (i % 7 != 0).then_some(i as f64 / 2.0)).collect();
    let active: Vec<bool> = ids.iter().map(|i| i % 2 == 0).collect();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
            Arc::new(Float64Array::from(scores)),
            Arc::new(BooleanArray::from(active)),
        ],
    )
    .expect("batch");
    table.write(&batch).expect("write");
    table.create_index("by_name", &["name"], IndexOptions::default()).expect("index");
    db.close().expect("close");
}

#[test]
fn psql_queries_and_changes_a_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    make_players(&path);
    let server = Server::start(&path, &[]);

    // Rows the engine wrote, through the primary key, the index, aggregates.
    assert_eq!(
        server.psql("SELECT id, name, score, active FROM players WHERE id = 14").ok(),
        ["14|p0014||t"]
    );
    assert_eq!(
        server.psql("SELECT id, score FROM players WHERE id BETWEEN 3 AND 5 ORDER BY id").ok(),
        ["3|1.5", "4|2.0", "5|2.5"]
    );
    assert_eq!(server.psql("SELECT count(*) FROM players WHERE name = 'p0042'").ok(), ["10"]);
    assert_eq!(server.psql("SELECT count(*), count(score), sum(id) FROM players").ok(), ["1000|858|500500"]);
    assert_eq!(
        server.psql("SELECT active, count(*) FROM players GROUP BY active ORDER BY active").ok(),
        ["f|500", "t|500"]
    );

    // DDL and DML, each answered with PostgreSQL's command tag.
    assert_eq!(
        server
            .psql("CREATE TABLE teams (team VARCHAR NOT NULL, city VARCHAR, founded INT, PRIMARY KEY (team))")
            .ok(),
        ["CREATE TABLE"]
    );
    assert_eq!(
        server
            .psql("INSERT INTO teams VALUES ('owls', 'Oslo', 1901), ('bats', 'Bergen', NULL), ('elks', 'Oslo', 1950)")
            .ok(),
        ["INSERT 0 3"]
    );
    assert_eq!(server.psql("CREATE INDEX by_city ON teams (city)").ok(), ["CREATE INDEX"]);
    assert_eq!(
        server.psql("ALTER TABLE teams ADD COLUMN stadium VARCHAR DEFAULT 'none'").ok(),
        ["ALTER TABLE"]
    );
    assert_eq!(server.psql("SELECT stadium FROM teams WHERE team = 'owls'").ok(), ["none"]);
    assert_eq!(server.psql("ALTER TABLE teams DROP COLUMN stadium").ok(), ["ALTER TABLE"]);
    assert_eq!(server.psql("UPDATE teams SET founded = 1899 WHERE city = 'Oslo'").ok(), ["UPDATE 2"]);
    assert_eq!(server.psql("DELETE FROM players WHERE id > 990").ok(), ["DELETE 10"]);
    assert_eq!(
        server.psql("INSERT INTO teams SELECT 'x' || name, 'Bergen', 2000 FROM players WHERE id <= 3").ok(),
        ["INSERT 0 3"]
    );
    assert_eq!(
        server.psql("SELECT team, founded FROM teams WHERE city = 'Oslo' ORDER BY team").ok(),
        ["elks|1899", "owls|1899"]
    );
    assert_eq!(
        server
            .psql("SELECT t.city, count(*) FROM teams t JOIN players p ON t.team = 'x' || p.name GROUP BY t.city")
            .ok(),
        ["Bergen|30"]
    );

    // A history window, and a row's versions through its table function.
    assert_eq!(server.psql("ALTER TABLE teams SET (history = '1 hour')").ok(), ["ALTER TABLE"]);
    assert_eq!(server.psql("UPDATE teams SET founded = 1901 WHERE team = 'bats'").ok(), ["UPDATE 1"]);
    assert_eq!(server.psql("SELECT founded, _deleted FROM history('teams', 'bats')").ok(), ["1901|f", "|f"]);

    // psql's own catalog queries (\dt reads pg_catalog).
    let relations = server.psql("\\dt").ok();
    assert!(relations.iter().any(|r| r.contains("|players|")), "{relations:?}");
    assert!(relations.iter().any(|r| r.contains("|teams|")), "{relations:?}");

    // Errors reach the client and change nothing.
    assert!(server.psql("SELECT nosuch FROM players").error().contains("nosuch"));
    assert!(server.psql("INSERT INTO teams VALUES (NULL, 'Oslo', 1)").error().contains("ERROR"));
    assert!(server.psql("CREATE INDEX bad ON teams (nosuch)").error().contains("nosuch"));
    assert!(server.psql("UPDATE teams SET founded = $1").error().contains("ERROR"));
    assert_eq!(server.psql("SELECT count(*) FROM teams").ok(), ["6"]);

    transaction_blocks_through_psql(&server);

    assert_eq!(server.psql("DROP INDEX by_city").ok(), ["DROP INDEX"]);
    assert!(server.stop().success(), "basalt serve should exit 0 on SIGTERM");

    // What psql changed is in the database when the engine opens it again.
    let db = Db::open(&path, Options::default()).expect("reopen");
    let teams = db.table("teams").expect("teams");
    assert!(teams.indexes().is_empty(), "by_city was dropped");
    let owls = teams.get(&[basalt::KeyValue::Str("owls")]).expect("get").expect("owls");
    let founded = owls.column_by_name("founded").expect("founded");
    assert_eq!(
        basalt::arrow_array::cast::AsArray::as_primitive::<basalt::arrow_array::types::Int32Type>(founded)
            .value(0),
        1899
    );
    let players = db.table("players").expect("players");
    assert!(players.get(&[basalt::KeyValue::I64(991)]).expect("get").is_none());
    assert!(players.get(&[basalt::KeyValue::I64(990)]).expect("get").is_some());
    db.close().expect("close");
}

/// `BEGIN … COMMIT` through psql, on the database of
/// `psql_queries_and_changes_a_database`.
fn transaction_blocks_through_psql(server: &Server) {
    // Transaction blocks: the statements between BEGIN and COMMIT are one
    // Basalt transaction, which ROLLBACK (or the connection's end) undoes.
    assert_eq!(
        server.psql_script("BEGIN;\nINSERT INTO teams VALUES ('yaks', 'Oslo', 1);\n").ok(),
        ["BEGIN", "INSERT 0 1"]
    );
    assert_eq!(
        server.psql("SELECT count(*) FROM teams WHERE team = 'yaks'").ok(),
        ["0"],
        "closed without COMMIT"
    );
    assert_eq!(
        server.psql_script("BEGIN;\nSELECT count(*) FROM teams;\nROLLBACK;\n").ok(),
        ["BEGIN", "6", "ROLLBACK"]
    );
    // The same block as one message (psql -c sends it so): the block is
    // known to the INSERT at once, though pgwire learns of it only after
    // the whole message.
    assert_eq!(
        server.psql("BEGIN; INSERT INTO teams VALUES ('yaks', 'Oslo', 1); ROLLBACK;").ok(),
        ["BEGIN", "INSERT 0 1", "ROLLBACK"]
    );
    assert_eq!(server.psql("SELECT count(*) FROM teams WHERE team = 'yaks'").ok(), ["0"]);
    assert_eq!(
        server
            .psql("BEGIN; INSERT INTO teams VALUES ('yaks', 'Oslo', 1); UPDATE players SET score = 0 WHERE id = 1; COMMIT;")
            .ok(),
        ["BEGIN", "INSERT 0 1", "UPDATE 1", "COMMIT"]
    );
    assert_eq!(server.psql("SELECT founded FROM teams WHERE team = 'yaks'").ok(), ["1"]);
    assert_eq!(server.psql("SELECT score FROM players WHERE id = 1").ok(), ["0"]);
    // What a block cannot do is refused, and fails the block: its COMMIT
    // rolls back and says why.
    let refused = server.psql_script("BEGIN;\nCREATE INDEX in_block ON teams (founded);\n").error();
    assert!(refused.contains("DDL inside BEGIN"), "{refused}");
    let failed = server
        .psql_script("BEGIN;\nDELETE FROM teams WHERE team = 'yaks';\nSELECT nosuch FROM teams;\nCOMMIT;\n")
        .error();
    assert!(failed.contains("nosuch"), "{failed}");
    assert_eq!(
        server.psql("SELECT count(*) FROM teams WHERE team = 'yaks'").ok(),
        ["1"],
        "the failed block rolled back"
    );
    // The block reads its own writes.
    assert_eq!(
        server
            .psql("BEGIN; DELETE FROM teams WHERE team = 'yaks'; SELECT count(*) FROM teams; UPDATE teams SET founded = founded WHERE city = 'Oslo'; COMMIT;")
            .ok(),
        ["BEGIN", "DELETE 1", "6", "UPDATE 2", "COMMIT"]
    );
    assert_eq!(server.psql("SELECT count(*) FROM teams").ok(), ["6"]);
}

#[test]
fn refuses_addresses_beyond_loopback_without_allow_remote() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .arg("serve")
        .arg(dir.path().join("db"))
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .expect("run basalt serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--allow-remote"), "{stderr}");
    assert!(!dir.path().join("db").exists(), "nothing is created when the address is refused");
}

#[test]
fn a_database_in_use_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default()).expect("open");
    let output = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .arg("serve")
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .expect("run basalt serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("basalt: "), "{stderr}");
    db.close().expect("close");
}

/// A client of the extended protocol (tokio-postgres: Parse, Bind, Execute,
/// results in binary) gets from prepared statements with parameters what
/// the same query with its values written in gives: the queries of one
/// table by key, key range or index take the direct path, the others
/// DataFusion's.
/// A server over the players database in `dir`, and the address a
/// PostgreSQL client connects to.
fn players_server(dir: &Path) -> (Server, String) {
    let path = dir.join("db");
    make_players(&path);
    let server = Server::start(&path, &[]);
    let address = format!("host=127.0.0.1 port={} user=basalt dbname=basalt", server.port);
    (server, address)
}

#[test]
fn prepared_statements_over_the_extended_protocol_answer_as_written_queries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, address) = players_server(dir.path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(&address, tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(connection);
        let text = |row: &tokio_postgres::Row| -> String {
            let id: i64 = row.get(0);
            let name: Option<String> = row.get(1);
            let score: Option<f64> = row.get(2);
            format!("{id}|{}|{}", name.unwrap_or_default(), score.map(|s| s.to_string()).unwrap_or_default())
        };
        let simple = |sql: String| {
            let client = &client;
            async move {
                let mut rows: Vec<String> = Vec::new();
                for message in client.simple_query(&sql).await.expect("simple query") {
                    if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
                        let score = row.get(2).map(|s| s.parse::<f64>().expect("score").to_string());
                        rows.push(format!(
                            "{}|{}|{}",
                            row.get(0).unwrap_or(""),
                            row.get(1).unwrap_or(""),
                            score.unwrap_or_default()
                        ));
                    }
                }
                rows.sort();
                rows
            }
        };
        let by_id =
            client.prepare("SELECT id, name, score FROM players WHERE id = $1").await.expect("prepare");
        let range = client
            .prepare("SELECT id, name, score FROM players WHERE id BETWEEN $1 AND $2 AND score > $3")
            .await
            .expect("prepare");
        let by_name =
            client.prepare("SELECT id, name, score FROM players WHERE name = $1").await.expect("prepare");
        let ordered = client
            .prepare("SELECT id, name, score FROM players WHERE name = $1 ORDER BY id")
            .await
            .expect("prepare");
        for k in [1i64, 7, 14, 500, 1000, 1001, -3] {
            let got: Vec<String> =
                client.query(&by_id, &[&k]).await.expect("by id").iter().map(text).collect();
            assert_eq!(
                got,
                simple(format!("SELECT id, name, score FROM players WHERE id = {k}")).await,
                "id {k}"
            );
            let mut got: Vec<String> = client
                .query(&range, &[&k, &(k + 30), &10.5f64])
                .await
                .expect("range")
                .iter()
                .map(text)
                .collect();
            got.sort();
            let want = simple(format!(
                "SELECT id, name, score FROM players WHERE id BETWEEN {k} AND {} AND score > 10.5",
                k + 30
            ))
            .await;
            assert_eq!(got, want, "range from {k}");
            let name = format!("p{:04}", k.rem_euclid(100));
            let mut got: Vec<String> =
                client.query(&by_name, &[&name]).await.expect("by name").iter().map(text).collect();
            got.sort();
            let want = simple(format!("SELECT id, name, score FROM players WHERE name = '{name}'")).await;
            assert_eq!(got.len(), 10, "{name}");
            assert_eq!(got, want, "{name}");
            let mut through_datafusion: Vec<String> =
                client.query(&ordered, &[&name]).await.expect("ordered").iter().map(text).collect();
            through_datafusion.sort();
            assert_eq!(through_datafusion, want, "{name} ordered");
        }
        let none: Option<i64> = None;
        assert!(client.query(&by_id, &[&none]).await.expect("null").is_empty());
        let text_for_int = client.query("SELECT id FROM players WHERE id = $1", &[&"14"]).await;
        assert!(text_for_int.is_err(), "a text value for a BIGINT parameter is refused: {text_for_int:?}");
    });
    assert!(server.stop().success());
}

#[test]
fn transaction_blocks_read_a_snapshot_and_lose_to_an_earlier_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, address) = players_server(dir.path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let connect = || async {
            let (client, connection) =
                tokio_postgres::connect(&address, tokio_postgres::NoTls).await.expect("connect");
            tokio::spawn(connection);
            client
        };
        let (a, b) = (connect().await, connect().await);
        let score = |rows: Vec<tokio_postgres::Row>| rows.first().and_then(|r| r.get::<_, Option<f64>>(0));
        let by_id = a.prepare("SELECT score FROM players WHERE id = $1").await.expect("prepare");
        let by_id_b = b.prepare("SELECT score FROM players WHERE id = $1").await.expect("prepare");
        let before = score(a.query(&by_id, &[&2i64]).await.expect("query"));

        // A's block reads BEGIN's snapshot, through a prepared point query
        // (which inside a block leaves the direct path) too.
        a.batch_execute("BEGIN").await.expect("begin");
        b.batch_execute("UPDATE players SET score = 99 WHERE id = 2").await.expect("b's update");
        assert_eq!(score(a.query(&by_id, &[&2i64]).await.expect("in block")), before);
        assert_eq!(score(b.query(&by_id_b, &[&2i64]).await.expect("outside")), Some(99.0));
        // A writes id 2, which B wrote after A's snapshot, and a row with
        // parameters; B sees neither.
        a.batch_execute("UPDATE players SET score = 1 WHERE id = 2").await.expect("a's update");
        let insert =
            a.prepare("INSERT INTO players (id, name, score) VALUES ($1, $2, $3)").await.expect("prepare");
        assert_eq!(a.execute(&insert, &[&5000i64, &"new", &1.5f64]).await.expect("insert"), 1);
        assert!(b.query(&by_id_b, &[&5000i64]).await.expect("outside").is_empty());
        // A's COMMIT is refused (B committed id 2 first); nothing of it lands.
        let err = a.batch_execute("COMMIT").await.expect_err("a conflict");
        assert_eq!(err.code(), Some(&tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE), "{err:?}");
        assert_eq!(score(b.query(&by_id_b, &[&2i64]).await.expect("after")), Some(99.0));
        assert!(b.query(&by_id_b, &[&5000i64]).await.expect("after").is_empty());

        // A block that commits: every change at once.
        a.batch_execute("BEGIN").await.expect("begin");
        a.batch_execute("DELETE FROM players WHERE id = 3").await.expect("delete");
        assert_eq!(a.execute(&insert, &[&5001i64, &"one", &2.5f64]).await.expect("insert"), 1);
        assert_eq!(score(b.query(&by_id_b, &[&5001i64]).await.expect("before commit")), None);
        a.batch_execute("COMMIT").await.expect("commit");
        assert_eq!(score(b.query(&by_id_b, &[&5001i64]).await.expect("after commit")), Some(2.5));
        assert!(b.query(&by_id_b, &[&3i64]).await.expect("deleted").is_empty());

        // A connection that ends inside a block rolls it back.
        let c = connect().await;
        c.batch_execute("BEGIN; DELETE FROM players WHERE id = 4").await.expect("c's block");
        drop(c);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(b.query(&by_id_b, &[&4i64]).await.expect("after c").len(), 1);
    });
    assert!(server.stop().success());
}

/// A client of the extended protocol over an empty database with
/// `--create`, on a runtime of its own; `run` gets a connect function.
fn with_clients<F, Fut>(run: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&dir.path().join("db"), &["--create"]);
    let address = format!("host=127.0.0.1 port={} user=basalt dbname=basalt", server.port);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(run(address));
    assert!(server.stop().success());
}

async fn connect(address: &str) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(address, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

/// The error's message, and whether its SQLSTATE is `code`.
fn refused(err: &tokio_postgres::Error, code: &tokio_postgres::error::SqlState) -> (String, bool) {
    let db = err.as_db_error();
    (db.map_or_else(|| err.to_string(), |e| e.message().to_string()), db.is_some_and(|e| e.code() == code))
}

/// The outside review's first finding over the wire: statements prepared
/// before another connection's `ALTER TABLE` answered with the old layout
/// (two columns after an ADD; `(1, 2054846976)`, the bytes of `'zzz'` read
/// as an INTEGER, after `a` was dropped and added again as VARCHAR). They
/// are refused with "prepare it again" (SQLSTATE 0A000), and prepared
/// again they answer with the new columns.
#[test]
fn statements_prepared_before_an_alter_are_refused_then_prepared_again() {
    with_clients(|address| async move {
        let (a, b) = (connect(&address).await, connect(&address).await);
        a.batch_execute(
            "CREATE TABLE t (id BIGINT, a INTEGER, PRIMARY KEY (id)); INSERT INTO t VALUES (1,10),(2,20)",
        )
        .await
        .expect("setup");
        let star = b.prepare("SELECT * FROM t WHERE id=$1 OR a>0").await.expect("prepare");
        let ordered = b.prepare("SELECT id, a FROM t WHERE id=$1 ORDER BY a").await.expect("prepare");
        assert_eq!(b.query(&star, &[&1i64]).await.expect("before").len(), 2);
        a.batch_execute("ALTER TABLE t ADD COLUMN z BIGINT DEFAULT 5").await.expect("alter");
        let err = b.query(&star, &[&1i64]).await.expect_err("the table changed");
        let (message, code) = refused(&err, &tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED);
        assert!(message.contains("prepare it again") && code, "{err:?}");
        let star = b.prepare("SELECT * FROM t WHERE id=$1 OR a>0").await.expect("prepare again");
        let rows = b.query(&star, &[&1i64]).await.expect("after");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].len(), 3, "the new column");
        a.batch_execute("ALTER TABLE t DROP COLUMN a; ALTER TABLE t ADD COLUMN a VARCHAR DEFAULT 'zzz'")
            .await
            .expect("alter");
        let err = b.query(&ordered, &[&1i64]).await.expect_err("the table changed");
        assert!(refused(&err, &tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED).1, "{err:?}");
        let ordered = b.prepare("SELECT id, a FROM t WHERE id=$1 ORDER BY a").await.expect("prepare again");
        let rows = b.query(&ordered, &[&1i64]).await.expect("after");
        assert_eq!((rows[0].get::<_, i64>(0), rows[0].get::<_, String>(1)), (1, "zzz".to_string()));
        // The connection is still up.
        assert_eq!(b.query(&ordered, &[&2i64]).await.expect("again").len(), 1);
    });
}

/// Every statement shape prepared over the wire (the direct path's point
/// query and count, an OR, an ORDER BY, an IN list with a column later
/// made a TIMESTAMP — a worker panic before — an aggregate, a join, an
/// INSERT with parameters, an UPDATE and a DELETE), after each kind of
/// change of its table: an error saying to prepare it again, never an
/// answer, and the connection goes on.
#[test]
fn every_shape_prepared_over_the_wire_refuses_each_change_of_its_table() {
    let changes: [&str; 4] = [
        "ALTER TABLE {t} ADD COLUMN z BIGINT DEFAULT 5",
        "ALTER TABLE {t} DROP COLUMN a; ALTER TABLE {t} ADD COLUMN a TIMESTAMP",
        "ALTER TABLE {t} RENAME COLUMN a TO c",
        "DROP TABLE {t}; CREATE TABLE {t} (id BIGINT, a VARCHAR, PRIMARY KEY (id)); INSERT INTO {t} VALUES (1, 'x')",
    ];
    with_clients(|address| async move {
        let (a, b) = (connect(&address).await, connect(&address).await);
        a.batch_execute(
            "CREATE TABLE u (id BIGINT, b VARCHAR, PRIMARY KEY (id)); INSERT INTO u VALUES (1,'x'),(2,'y')",
        )
        .await
        .expect("u");
        for (n, change) in changes.iter().enumerate() {
            let t = format!("t{n}");
            a.batch_execute(&format!(
                "CREATE TABLE {t} (id BIGINT, a INTEGER, PRIMARY KEY (id)); INSERT INTO {t} VALUES (1,10),(2,20)"
            ))
            .await
            .expect("setup");
            let queries = [
                format!("SELECT id, a FROM {t} WHERE id = $1"),
                format!("SELECT * FROM {t} WHERE id = $1 OR a > 0"),
                format!("SELECT id, a FROM {t} WHERE id = $1 ORDER BY a"),
                format!("SELECT a FROM {t} WHERE id IN ($1, $2)"),
                format!("SELECT sum(a) FROM {t} WHERE id >= $1"),
                format!("SELECT {t}.id, a, b FROM {t} JOIN u ON {t}.id = u.id WHERE {t}.id = $1"),
            ];
            let mut prepared = Vec::new();
            for text in &queries {
                prepared.push(b.prepare(text).await.unwrap_or_else(|e| panic!("{text}: {e}")));
            }
            let count = b.prepare(&format!("SELECT count(*) FROM {t}")).await.expect("count");
            let insert =
                b.prepare(&format!("INSERT INTO {t} (id, a) VALUES ($1, $2)")).await.expect("insert");
            let update = b.prepare(&format!("UPDATE {t} SET a = 1 WHERE id = 1")).await.expect("update");
            let delete = b.prepare(&format!("DELETE FROM {t} WHERE id = 2")).await.expect("delete");
            a.batch_execute(&change.replace("{t}", &t)).await.unwrap_or_else(|e| panic!("{change}: {e}"));
            let code = tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED;
            let expect_refused = |what: &str, result: Result<u64, tokio_postgres::Error>| {
                let err = result.expect_err(&format!("{what} after {change}"));
                let (message, is_code) = refused(&err, &code);
                assert!(message.contains("prepare it again") && is_code, "{what} after {change}: {err:?}");
            };
            for (text, statement) in queries.iter().zip(&prepared) {
                let result = if text.contains("IN (") {
                    b.query(statement, &[&1i64, &2i64]).await
                } else {
                    b.query(statement, &[&1i64]).await
                };
                expect_refused(text, result.map(|rows| rows.len() as u64));
            }
            expect_refused("count", b.query(&count, &[]).await.map(|rows| rows.len() as u64));
            expect_refused("insert", b.execute(&insert, &[&9i64, &90i32]).await);
            expect_refused("update", b.execute(&update, &[]).await);
            expect_refused("delete", b.execute(&delete, &[]).await);
            // Nothing was written, and the connection answers.
            let ids = b.query(&format!("SELECT id FROM {t} ORDER BY id"), &[]).await.expect("ids");
            let ids: Vec<i64> = ids.iter().map(|r| r.get(0)).collect();
            assert!(ids == [1, 2] || ids == [1], "{change}: {ids:?}");
        }
    });
}

/// The name tokio-postgres gave a prepared statement (only its `Debug`
/// shows it).
fn statement_name(statement: &tokio_postgres::Statement) -> String {
    let debug = format!("{statement:?}");
    let name = debug.split("name: \"").nth(1).and_then(|rest| rest.split('"').next());
    name.unwrap_or_else(|| panic!("no name in {debug}")).to_string()
}

/// `DEALLOCATE ALL` (which psycopg sends after a ROLLBACK, an ALTER or a
/// DROP), `DEALLOCATE [PREPARE] name` and `DISCARD ALL`, as PostgreSQL
/// answers them; and a second BEGIN inside a block, which PostgreSQL warns
/// of and goes on.
#[test]
fn deallocate_and_discard_close_the_connections_statements() {
    with_clients(|address| async move {
        let c = connect(&address).await;
        c.batch_execute(
            "CREATE TABLE t (id BIGINT, a INTEGER, PRIMARY KEY (id)); INSERT INTO t VALUES (1,10)",
        )
        .await
        .expect("setup");
        let one = c.prepare("SELECT a FROM t WHERE id = $1").await.expect("prepare");
        let two = c.prepare("SELECT id FROM t WHERE a = $1").await.expect("prepare");
        c.batch_execute(&format!("DEALLOCATE {}", statement_name(&one))).await.expect("DEALLOCATE name");
        assert!(c.query(&one, &[&1i64]).await.is_err(), "deallocated");
        assert_eq!(c.query(&two, &[&10i32]).await.expect("still there").len(), 1);
        c.batch_execute(&format!("DEALLOCATE PREPARE {}", statement_name(&two)))
            .await
            .expect("DEALLOCATE PREPARE name");
        assert!(c.query(&two, &[&10i32]).await.is_err(), "deallocated");
        let err = c.batch_execute("DEALLOCATE nosuch").await.expect_err("no such statement");
        let message = refused(&err, &tokio_postgres::error::SqlState::INVALID_SQL_STATEMENT_NAME).0;
        assert!(message.contains("nosuch"), "{err:?}");

        let three = c.prepare("SELECT a FROM t WHERE id = $1").await.expect("prepare");
        let four = c.prepare("SELECT id FROM t WHERE a = $1").await.expect("prepare");
        c.batch_execute("ROLLBACK; DEALLOCATE ALL").await.expect("DEALLOCATE ALL");
        assert!(c.query(&three, &[&1i64]).await.is_err() && c.query(&four, &[&10i32]).await.is_err());
        // Through the extended protocol too, and with nothing prepared.
        c.execute("DEALLOCATE ALL", &[]).await.expect("DEALLOCATE ALL, extended");
        let five = c.prepare("SELECT a FROM t WHERE id = $1").await.expect("prepare");
        c.batch_execute("DISCARD ALL").await.expect("DISCARD ALL");
        assert!(c.query(&five, &[&1i64]).await.is_err(), "discarded");
        c.batch_execute("DISCARD PLANS").await.expect("DISCARD PLANS");

        // Inside a block DISCARD ALL is refused (25001); a second BEGIN is
        // a warning and the block goes on.
        c.batch_execute("BEGIN").await.expect("begin");
        c.batch_execute("BEGIN").await.expect("a second BEGIN goes on");
        c.batch_execute("INSERT INTO t VALUES (2, 20)").await.expect("insert in block");
        c.batch_execute("COMMIT").await.expect("commit");
        assert_eq!(c.query("SELECT id FROM t", &[]).await.expect("ids").len(), 2);
        c.batch_execute("BEGIN").await.expect("begin");
        let err = c.batch_execute("DISCARD ALL").await.expect_err("in a block");
        assert!(refused(&err, &tokio_postgres::error::SqlState::ACTIVE_SQL_TRANSACTION).1, "{err:?}");
        c.batch_execute("ROLLBACK").await.expect("rollback");
    });
}

/// A parameter value its column's type cannot hold is an error naming the
/// parameter and the value (it was "FLOAT value 7 is out of range for
/// Int32"), on the direct path and DataFusion's alike.
#[test]
fn a_parameter_that_does_not_fit_its_type_is_named() {
    use tokio_postgres::types::Type;
    with_clients(|address| async move {
        let c = connect(&address).await;
        c.batch_execute(
            "CREATE TABLE t (id INTEGER, a INTEGER, PRIMARY KEY (id)); INSERT INTO t VALUES (1,10)",
        )
        .await
        .expect("setup");
        for text in ["SELECT a FROM t WHERE id = $1", "SELECT a FROM t WHERE id = $1 ORDER BY a"] {
            let err = c.query_typed(text, &[(&7.5f64, Type::FLOAT8)]).await.expect_err("7.5");
            let message = refused(&err, &tokio_postgres::error::SqlState::INVALID_PARAMETER_VALUE).0;
            assert_eq!(message, "$1: 7.5 is not an INTEGER", "{text}");
            let err = c.query_typed(text, &[(&(1i64 << 40), Type::INT8)]).await.expect_err("2^40");
            let message = refused(&err, &tokio_postgres::error::SqlState::INVALID_PARAMETER_VALUE).0;
            assert_eq!(message, "$1: 1099511627776 is not an INTEGER", "{text}");
            let rows = c.query_typed(text, &[(&1i64, Type::INT8)]).await.expect("1 fits");
            assert_eq!(rows.len(), 1, "{text}");
        }
    });
}
