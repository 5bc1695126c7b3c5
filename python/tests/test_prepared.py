"""SQL parameters and prepared statements (issue 38): values are bound,
never written into the text; a value of the wrong type is an error; a
prepared statement answers as the same query with its values written in."""

from __future__ import annotations

import pyarrow as pa
import pytest

import basalt


@pytest.fixture
def people(db: basalt.Database) -> basalt.Database:
    db.sql("CREATE TABLE people (id BIGINT, name VARCHAR, age INT, PRIMARY KEY (id))")
    db.sql("CREATE INDEX by_name ON people (name)")
    rows = ", ".join(f"({i}, 'p{i % 17}', {i % 90})" for i in range(500))
    db.sql(f"INSERT INTO people VALUES {rows}, (1000, 'it''s', NULL)")
    db.flush()
    return db


def ids(table: pa.Table) -> list[object]:
    return sorted(table.column(0).to_pylist())


def test_parameters_answer_as_the_values_written_in(people: basalt.Database) -> None:
    for k in [-1, 0, 7, 499, 1000, 2**40]:
        assert ids(people.sql("SELECT id, age FROM people WHERE id = $1", [k])) == ids(
            people.sql(f"SELECT id, age FROM people WHERE id = {k}")
        )
    got = people.sql("SELECT id FROM people WHERE id BETWEEN $1 AND $2 AND age > $3", (10, 60, 20))
    assert ids(got) == ids(people.sql("SELECT id FROM people WHERE id BETWEEN 10 AND 60 AND age > 20"))
    assert ids(people.sql("SELECT id FROM people WHERE name = $1", ["p3"])) == list(range(3, 500, 17))
    assert ids(people.sql("SELECT id FROM people WHERE name = $1", ["it's"])) == [1000]
    assert people.sql("SELECT id FROM people WHERE name = $1", ["it's' OR '1'='1"]).num_rows == 0
    assert people.sql("SELECT id FROM people WHERE name = $1", ["p3\x00"]).num_rows == 0
    assert people.sql("SELECT id FROM people WHERE id = $1", [None]).num_rows == 0


def test_a_prepared_statement_runs_many_times_on_the_direct_path(people: basalt.Database) -> None:
    get = people.prepare("SELECT name, age FROM people WHERE id = $1")
    assert get.parameter_count == 1
    assert get.path.startswith("direct"), get.path
    for k in range(0, 500, 37):
        row = get.execute([k]).to_pylist()
        assert row == [{"name": f"p{k % 17}", "age": k % 90}]
    assert get.execute([12345]).num_rows == 0
    assert get.execute([12345]).schema.names == ["name", "age"]
    count = people.prepare("SELECT count(*) AS n FROM people WHERE name = $1")
    assert count.path == "DataFusion"
    assert count.execute(["p3"]).column(0).to_pylist() == [len(range(3, 500, 17))]


@pytest.mark.parametrize("wrong", ["7", 7.5, b"7", True])
def test_a_parameter_of_the_wrong_type_is_an_error(people: basalt.Database, wrong: object) -> None:
    with pytest.raises(basalt.InvalidArgumentError, match=r"parameter \$1"):
        people.sql("SELECT id FROM people WHERE id = $1", [wrong])


def test_parameter_lists_that_do_not_fit_are_errors(people: basalt.Database) -> None:
    with pytest.raises(basalt.InvalidArgumentError, match="2 parameters"):
        people.sql("SELECT id FROM people WHERE id BETWEEN $1 AND $2", [1])
    with pytest.raises(TypeError, match="sequence"):
        people.sql("SELECT id FROM people WHERE name = $1", "p3")
    with pytest.raises(TypeError, match=r"parameter \$1"):
        people.sql("SELECT id FROM people WHERE id = $1", [object()])
    with pytest.raises(TypeError, match="64 bits"):
        people.sql("SELECT id FROM people WHERE id = $1", [2**70])


def test_dates_and_naive_datetimes_bind_to_date_and_timestamp_columns(db: basalt.Database) -> None:
    import datetime

    db.sql("CREATE TABLE ev (id BIGINT PRIMARY KEY, day DATE, at TIMESTAMP)")
    db.sql("INSERT INTO ev VALUES (1, '2024-02-29', '2024-02-29 12:30:00.25'), (2, '1969-12-31', '1969-12-31 23:59:59')")
    assert ids(db.sql("SELECT id FROM ev WHERE day = $1", [datetime.date(2024, 2, 29)])) == [1]
    assert ids(db.sql("SELECT id FROM ev WHERE day < $1", [datetime.date(1970, 1, 1)])) == [2]
    at = datetime.datetime(2024, 2, 29, 12, 30, 0, 250000)
    assert ids(db.sql("SELECT id FROM ev WHERE at = $1", [at])) == [1]
    assert ids(db.sql("SELECT id FROM ev WHERE at < $1", [datetime.datetime(1970, 1, 1)])) == [2]
    with pytest.raises(TypeError, match="time zone"):
        db.sql("SELECT id FROM ev WHERE at = $1", [at.replace(tzinfo=datetime.timezone.utc)])
    with pytest.raises(basalt.InvalidArgumentError, match=r"parameter \$1"):
        db.sql("SELECT id FROM ev WHERE day = $1", ["2024-02-29"])


def test_a_statement_after_close_raises_closed(tmp_path: object) -> None:
    db = basalt.open(str(tmp_path) + "/db")
    db.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    stmt = db.prepare("SELECT v FROM t WHERE id = $1")
    assert stmt.execute([1]).column(0).to_pylist() == ["a"]
    db.close()
    with pytest.raises(basalt.ClosedError):
        stmt.execute([1])


def test_a_read_only_database_prepares_queries_only(tmp_path: object) -> None:
    path = str(tmp_path) + "/db"
    with basalt.open(path) as db:
        db.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)")
        db.sql("INSERT INTO t VALUES (1, 'a')")
    with basalt.open(path, read_only=True) as db:
        assert db.prepare("SELECT v FROM t WHERE id = $1").execute([1]).num_rows == 1
        with pytest.raises(basalt.ReadOnlyError):
            db.prepare("DELETE FROM t WHERE id = 1")


def test_a_read_only_database_says_a_typo_is_a_syntax_error(tmp_path: object) -> None:
    # Text that does not parse is not a write: the user is told what is
    # wrong with it, as on a writable handle.
    path = str(tmp_path) + "/db"
    with basalt.open(path) as db:
        db.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)")
    with basalt.open(path, read_only=True) as db:
        for call in (db.sql, db.prepare):
            with pytest.raises(basalt.InvalidArgumentError, match="SQL: .*SELEC"):
                call("SELEC 1")
        assert db.sql("EXPLAIN SELECT * FROM t").num_rows > 0
        assert db.sql("SHOW TABLES").num_rows > 0
        # Statements only DataFusion's parser knows still count as writes.
        for text in (
            "COPY t TO '/tmp/never-written.csv'",
            "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/tmp/x.csv'",
            "EXPLAIN ANALYZE INSERT INTO t VALUES (2, 'b')",
            "INSERT INTO t VALUES (2, 'b')",
        ):
            with pytest.raises(basalt.ReadOnlyError):
                db.sql(text)


@pytest.mark.parametrize(
    "change",
    [
        ["ALTER TABLE t ADD COLUMN z BIGINT DEFAULT 5"],
        ["ALTER TABLE t DROP COLUMN a", "ALTER TABLE t ADD COLUMN a VARCHAR DEFAULT 'zzz'"],
        ["ALTER TABLE t RENAME COLUMN a TO c"],
        ["DROP TABLE t", "CREATE TABLE t (id BIGINT, a VARCHAR, PRIMARY KEY (id))"],
    ],
)
def test_a_statement_prepared_before_its_table_changed_must_be_prepared_again(
    db: basalt.Database, change: list[str]
) -> None:
    # Issue 56: a plan outlived ALTER TABLE and answered with the old layout.
    db.sql("CREATE TABLE t (id BIGINT, a INTEGER, PRIMARY KEY (id))")
    db.sql("INSERT INTO t VALUES (1, 10), (2, 20)")
    db.sql("CREATE TABLE u (id BIGINT, b VARCHAR, PRIMARY KEY (id))")
    db.sql("INSERT INTO u VALUES (1, 'x')")
    shapes = [
        ("SELECT id, a FROM t WHERE id = $1", [1]),
        ("SELECT * FROM t WHERE id = $1 OR a > 0", [1]),
        ("SELECT id, a FROM t WHERE id = $1 ORDER BY a", [1]),
        ("SELECT a FROM t WHERE id IN ($1, $2)", [1, 2]),
        ("SELECT sum(a) FROM t WHERE id >= $1", [1]),
        ("SELECT t.id, a, b FROM t JOIN u ON t.id = u.id WHERE t.id = $1", [1]),
        ("INSERT INTO t (id, a) VALUES ($1, $2)", [9, 90]),
        ("DELETE FROM t WHERE id = 2", []),
    ]
    prepared = [(db.prepare(text), params) for text, params in shapes]
    for step in change:
        db.sql(step)
    for statement, params in prepared:
        with pytest.raises(basalt.InvalidArgumentError, match="prepare it again"):
            statement.execute(params)
    # Nothing was written by the refused INSERT and DELETE.
    assert db.sql("SELECT count(*) AS n FROM t").column(0).to_pylist() == [0 if "DROP TABLE t" in change else 2]
    # db.sql plans the text again by itself.
    if "ADD COLUMN z" in change[0]:
        assert db.sql("SELECT * FROM t WHERE id = $1 OR a > 0", [1]).num_columns == 3
