"""SQL answers compared with two oracles, over random tables and predicates.

Basalt runs each query through DataFusion with its filters, key ranges,
indexes and zone maps pushed into the engine. The same query then runs in
DuckDB over the same rows (an engine of its own, the first oracle), and in
DataFusion over the rows read back as plain Arrow (the same planner without
any of Basalt's pushdown, the second). Every column type the SQL layer
takes, edge values (NULL, NaN, -0.0 and 0.0, infinities, integer extremes,
the empty string and strings holding NUL), predicates of every operator and
shape (IN and NOT IN lists with NULLs, NOT, OR, BETWEEN, casts, literals of
other types), in every storage state (memtable, flushed, overwritten and
deleted, compacted, indexed). Answers are compared exactly.

Seeded: the seed is printed, and a failure names it with the query and the
state; `BASALT_SQL_DIFF_SEED=<seed>` replays it, `BASALT_SQL_DIFF_ROUNDS`
runs more rounds.
"""

from __future__ import annotations

import datetime
import decimal
import math
import os
import random
import re
from collections.abc import Callable
from typing import Any

import datafusion
import duckdb
import pyarrow as pa
import pytest

import basalt

ROUNDS = int(os.environ.get("BASALT_SQL_DIFF_ROUNDS", "3"))


def signed_zeros(query: str) -> bool:
    """Whether `query` compares with both zeros, `-0.0` and `0.0`."""
    return "-0.0" in query and re.search(r"(?<![-\d.])0\.0\b", query) is not None

# An integer column cast to DOUBLE and compared for equality with a literal
# two or more integers round to (see check_state).
LOSSY_CAST_EQUALITY = re.compile(r"CAST\(\w+ AS DOUBLE\) = (9007199254740992\.0|1e19)")

SEED = int(os.environ.get("BASALT_SQL_DIFF_SEED", str(random.SystemRandom().randrange(2**32))))
QUERIES_PER_STATE = 40

# Near both limits, so that sums leave BIGINT (Basalt refuses them: docs/sql.md, Types).
I64 = [-(2**63), 2**63 - 1, 0, -1, 1, 2**53, 2**53 + 1, -(2**53) - 1, 42, 1000,
       2**63 - 2, -(2**63) + 1, 2**62, -(2**62)]
I32 = [-(2**31), 2**31 - 1, 0, -1, 1, 7, 100]
F64 = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -2.25, 1e300, -1e-300, 5e-324, 9007199254740993.0, 3.0]
# Dyadic values only: a REAL compared with a DOUBLE literal is widened by
# DuckDB and the literal narrowed by DataFusion, which agree only when the
# literal is exact in 32 bits.
F32 = [math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -1.25, 3.0, 1024.0]
STRINGS = ["", "a", "A", "ab", "a\x00b", "\x00", "é", "zz", "b", "a "]
DATES = [datetime.date(1970, 1, 1), datetime.date(2000, 2, 29), datetime.date(1, 1, 1),
         datetime.date(9999, 12, 31), datetime.date(1969, 12, 31), datetime.date(2024, 6, 1)]
TIMESTAMPS = [datetime.datetime(1970, 1, 1), datetime.datetime(2000, 2, 29, 12, 30, 0, 5),
              datetime.datetime(1900, 1, 1), datetime.datetime(2262, 4, 11), datetime.datetime(2024, 6, 1, 0, 0, 1)]

# column name -> (SQL type, Arrow type, edge values)
COLUMNS: dict[str, tuple[str, pa.DataType, list[Any]]] = {
    "i": ("BIGINT", pa.int64(), I64),
    "n": ("INTEGER", pa.int32(), I32),
    "f": ("DOUBLE", pa.float64(), F64),
    "r": ("REAL", pa.float32(), F32),
    "b": ("BOOLEAN", pa.bool_(), [True, False]),
    "s": ("VARCHAR", pa.string(), STRINGS),
    "d": ("DATE", pa.date32(), DATES),
    "ts": ("TIMESTAMP", pa.timestamp("us"), TIMESTAMPS),
}


def sql_literal(column: str, value: Any) -> str:
    """`value` written as SQL, of the column's type."""
    if value is None:
        return "NULL"
    kind = COLUMNS[column][0]
    if kind in ("DOUBLE", "REAL"):
        if math.isnan(value):
            return f"CAST('NaN' AS {kind})"
        if math.isinf(value):
            return f"CAST('{'-' if value < 0 else ''}Infinity' AS {kind})"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "-0.0"
        return repr(float(value))
    if kind == "BOOLEAN":
        return "true" if value else "false"
    if kind == "VARCHAR":
        return "'" + value.replace("'", "''") + "'"
    if kind == "DATE":
        return f"DATE '{value.isoformat()}'"
    if kind == "TIMESTAMP":
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    return str(value)


class Predicates:
    """Random WHERE clauses over the table's columns."""

    def __init__(self, rng: random.Random, columns: list[str] | None = None) -> None:
        self.rng = rng
        self.columns = list(COLUMNS) if columns is None else columns

    def value(self, column: str) -> Any:
        rng = self.rng
        edges = COLUMNS[column][2]
        kind = COLUMNS[column][0]
        if kind == "VARCHAR":
            # Strings holding NUL are in the rows, not in literals: SQL has
            # no portable way to write one (DataFusion's chr(0) refuses).
            return rng.choice([v for v in edges if "\x00" not in v])
        if rng.random() < 0.7 or kind in ("BOOLEAN", "DATE", "TIMESTAMP"):
            return rng.choice(edges)
        if kind in ("BIGINT", "INTEGER"):
            return rng.randint(-50, 50)
        return rng.choice([0.25, -3.5, 2.0, 100.5])

    def literal(self, column: str) -> str:
        """A literal for `column`, now and then of another type than the column's."""
        rng = self.rng
        kind = COLUMNS[column][0]
        # No float literal against an integer column: DataFusion (as
        # PostgreSQL) compares BIGINT and DOUBLE as doubles, where DuckDB
        # does not round the integer; both are SQL. The explicit
        # `CAST(i AS DOUBLE)` shape below compares doubles in both.
        if kind in ("BIGINT", "INTEGER") and rng.random() < 0.25:
            return rng.choice(["9007199254740992", "-1", "2147483648", "9223372036854775807"])
        if kind == "DOUBLE" and rng.random() < 0.2:
            return str(rng.choice([0, 1, -1, 9007199254740993]))
        if kind == "DATE" and rng.random() < 0.3:
            return f"'{self.value(column).isoformat()}'"
        return sql_literal(column, self.value(column))

    def comparison(self) -> str:
        rng = self.rng
        if not self.columns:
            return f"id {rng.choice(['=', '<', '>=', '<>'])} {rng.randint(-2, 60)}"
        column = rng.choice(self.columns)
        kind = COLUMNS[column][0]
        shape = rng.random()
        if kind == "BOOLEAN" and shape < 0.3:
            return rng.choice(["b", "NOT b", "b IN (false)", "b NOT IN (true)", "b IN (true, NULL)",
                               "b = false", "b <> true", "b IS TRUE", "b IS NOT FALSE"])
        if shape < 0.45:
            op = rng.choice(["=", "<>", "<", "<=", ">", ">="])
            left = column
            if kind in ("BIGINT", "INTEGER") and rng.random() < 0.2:
                left = f"CAST({column} AS DOUBLE)"
                return f"{left} {op} {rng.choice(['9007199254740992.0', '0.5', '-1.0', '1e19', '2147483648.0'])}"
            if rng.random() < 0.15:
                return f"{self.literal(column)} {op} {left}"
            return f"{left} {op} {self.literal(column)}"
        if shape < 0.6:
            # No float zero in IN lists: DataFusion 55 compares list members
            # with float values by their bits (`0.0 IN (-0.0)` and `-0.0 IN
            # (0.0)` are false; DuckDB and PostgreSQL say true). A known
            # upstream wrong answer, open in docs/RELIABILITY.md: IN lists
            # are evaluated by DataFusion, not pushed into the engine.
            items = [self.literal(column) for _ in range(rng.randint(1, 4))]
            if kind in ("DOUBLE", "REAL"):
                items = [i for i in items if i not in ("0.0", "-0.0", "0")] or ["1.5"]
            if rng.random() < 0.2:
                items.append("NULL")
            negated = "NOT " if rng.random() < 0.4 else ""
            return f"{column} {negated}IN ({', '.join(items)})"
        if shape < 0.72:
            negated = "NOT " if rng.random() < 0.3 else ""
            return f"{column} {negated}BETWEEN {self.literal(column)} AND {self.literal(column)}"
        if shape < 0.82:
            return f"{column} IS {rng.choice(['', 'NOT '])}NULL"
        if shape < 0.88 and kind == "VARCHAR":
            return f"{column} LIKE {rng.choice(['%a%', 'a%', '_', ''])!r}"
        return f"id {rng.choice(['=', '<', '>=', '<>'])} {rng.randint(-2, 60)}"

    def clause(self, depth: int = 0) -> str:
        rng = self.rng
        roll = rng.random()
        if depth >= 2 or roll < 0.5:
            return self.comparison()
        if roll < 0.7:
            return f"({self.clause(depth + 1)}) AND ({self.clause(depth + 1)})"
        if roll < 0.9:
            return f"({self.clause(depth + 1)}) OR ({self.clause(depth + 1)})"
        return f"NOT ({self.clause(depth + 1)})"


def random_row(rng: random.Random, key: int, columns: list[str] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": key}
    for name in COLUMNS if columns is None else columns:
        row[name] = None if rng.random() < 0.15 else rng.choice(COLUMNS[name][2])
    return row


def arrow_of(rows: list[dict[str, Any]], columns: list[str] | None = None) -> pa.Table:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)]
                       + [pa.field(name, COLUMNS[name][1]) for name in (COLUMNS if columns is None else columns)])
    return pa.Table.from_pylist(rows, schema=schema)


def comparable(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as tuples Python compares as SQL does: NaN equal to NaN (and
    -0.0 to 0.0, which Python already holds equal)."""
    def norm(v: Any) -> Any:
        return "NaN" if isinstance(v, float) and math.isnan(v) else v
    columns = [c.to_pylist() for c in table.columns]
    return [tuple(norm(v) for v in row) for row in zip(*columns)]


class Oracles:
    """DuckDB and in-memory DataFusion over the rows Basalt should hold."""

    def __init__(self) -> None:
        self.duck = duckdb.connect()

    def load(self, rows: list[dict[str, Any]], stored: pa.Table) -> None:
        expected = arrow_of(rows)
        self.duck.register("expected_rows", expected)
        self.duck.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM expected_rows")
        self.duck.unregister("expected_rows")
        # The second oracle reads what Basalt returns for a plain scan, so it
        # checks the pushdown alone.
        self.fusion = datafusion.SessionContext()
        batches = stored.to_batches() or [pa.RecordBatch.from_pylist([], schema=stored.schema)]
        self.fusion.register_record_batches("t", [batches])

    def duckdb(self, query: str) -> pa.Table:
        return self.duck.execute(query).to_arrow_table()

    def datafusion(self, query: str) -> pa.Table:
        return self.fusion.sql(query).to_arrow_table()


def queries(rng: random.Random, predicates: Predicates) -> list[tuple[str, bool]]:
    """(query, ordered): the rows of an unordered query are compared sorted."""
    out: list[tuple[str, bool]] = []
    for _ in range(QUERIES_PER_STATE):
        where = predicates.clause()
        roll = rng.random()
        if roll < 0.55:
            out.append((f"SELECT id FROM t WHERE {where} ORDER BY id", True))
        elif roll < 0.7:
            out.append((f"SELECT count(*) AS c FROM t WHERE {where}", True))
        elif roll < 0.9:
            # Sorted by a value: only the values are compared (SQL leaves the
            # order of equal values, -0.0 and 0.0 among them, open).
            column = rng.choice([c for c in COLUMNS if c != "b"])
            limit = f" LIMIT {rng.randint(1, 8)}" if rng.random() < 0.3 else ""
            direction = rng.choice(["ASC NULLS FIRST", "DESC NULLS LAST"])
            out.append((f"SELECT {column} FROM t WHERE {where} ORDER BY {column} {direction}{limit}", True))
        elif roll < 0.95:
            out.append((aggregate_query(rng, where), True))
        else:
            out.append((f"SELECT id, {rng.choice(list(COLUMNS))} FROM t WHERE {where}", False))
    return out


# What a group is keyed on in aggregate queries; NULL groups sort first.
GROUP_KEYS = ["b", "n", "d", "id % 3"]


def aggregate_query(rng: random.Random, where: str) -> str:
    """min/max of the float columns or sums of the integer ones, grouped or
    not: NaN, infinities and both zeros in a group, sums past BIGINT."""
    aggregates = rng.choice(["min(f), max(f), min(r), max(r), count(f)", "sum(i), sum(n), count(i)"])
    if rng.random() < 0.3:
        return f"SELECT {aggregates} FROM t WHERE {where}"
    key = rng.choice(GROUP_KEYS)
    return f"SELECT {key}, {aggregates} FROM t WHERE {where} GROUP BY {key} ORDER BY {key} NULLS FIRST"


def sum_out_of_bigint(rows: list[tuple[Any, ...]]) -> bool:
    """Whether DuckDB's answer holds an integer past BIGINT (DuckDB widens a
    sum to HUGEINT where Basalt refuses it with "sum out of range")."""
    return any(isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool)
               and not -(2**63) <= v < 2**63 for row in rows for v in row)


def sql_or_sum_refused(db: basalt.Database, query: str, expected: list[tuple[Any, ...]],
                       where: str) -> list[tuple[Any, ...]] | None:
    """Basalt's answer, or None where it refused a sum DuckDB says leaves BIGINT."""
    try:
        return comparable(db.sql(query))
    except basalt.Error as e:
        if "sum out of range" in str(e) and sum_out_of_bigint(expected):
            return None
        raise AssertionError(f"{where}\nBasalt failed: {e}\nDuckDB {expected}") from e


def check_state(db: basalt.Database, oracles: Oracles, rng: random.Random, seed: int, state: str,
                model: dict[int, dict[str, Any]]) -> int:
    rows = [model[k] for k in sorted(model)]
    stored = db.table("t").to_arrow()
    assert comparable(stored.sort_by("id")) == comparable(arrow_of(rows)), (
        f"seed {seed}, state {state}: a plain scan does not return the rows written")
    oracles.load(rows, stored)
    checked = 0
    for query, ordered in queries(rng, Predicates(rng)):
        where = f"seed {seed} (BASALT_SQL_DIFF_SEED={seed}), state {state}: {query}"
        try:
            expected = comparable(oracles.duckdb(query))
        except duckdb.Error:
            continue  # a query DuckDB refuses says nothing of Basalt
        got = sql_or_sum_refused(db, query, expected, where)
        if got is None:
            checked += 1
            continue
        assert not sum_out_of_bigint(expected), f"{where}\nBasalt {got}: a sum past BIGINT not refused"
        plain = comparable(oracles.datafusion(query))
        if not ordered:
            expected, got, plain = sorted(expected, key=repr), sorted(got, key=repr), sorted(plain, key=repr)
        # DataFusion without pushdown isolates the pushdown; where DuckDB
        # agrees with Basalt instead, the plain DataFusion is what is off (its
        # NULL-unsafe merge of IN lists, which Basalt's session guards:
        # crates/basalt-datafusion/src/in_lists.rs).
        assert got == plain or got == expected, (
            f"{where}\nBasalt (pushdown) {got}\nDataFusion without pushdown {plain}\nDuckDB {expected}")
        if got != expected and ordered and LOSSY_CAST_EQUALITY.search(query):
            # apache/datafusion#25523 (docs/sql.md, Statistics): DataFusion
            # 55 narrows `CAST(i AS DOUBLE) = 2^53` back through the lossy
            # cast to one integer, takes `i` for a constant and drops the
            # ORDER BY on it, with or without bounds from the table. Basalt
            # answers as DataFusion does (checked above); DuckDB keeps the
            # order. Known and documented, not counted as checked.
            continue
        if got != expected and signed_zeros(query):
            # DataFusion 55 itself (the plain oracle agrees with Basalt,
            # checked above) answers `(f <> -0.0) AND (f = 0.0)` true for
            # f = 0.0: across the two comparisons it tells the zeros apart
            # by their bits, as in its IN lists (docs/RELIABILITY.md). Seen
            # with seed 4182094400 on 2026-11-29; an upstream difference,
            # not counted as checked.
            continue
        assert got == expected, f"{where}\nBasalt {got}\nDuckDB {expected}"
        checked += 1
    return checked


def write(db: basalt.Database, model: dict[int, dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    if rows:
        db.table("t").write(arrow_of(rows))
        for row in rows:
            model[row["id"]] = row


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_sql_matches_duckdb_and_unpushed_datafusion(tmp_path: Any, round_: int) -> None:
    seed = SEED + round_
    print(f"differential SQL seed {seed} (replay: BASALT_SQL_DIFF_SEED={seed} BASALT_SQL_DIFF_ROUNDS=1)")
    rng = random.Random(seed)
    db = basalt.open(tmp_path / "db")
    oracles = Oracles()
    model: dict[int, dict[str, Any]] = {}
    try:
        db.create_table("t", arrow_of([]).schema, primary_key=["id"])
        states: list[tuple[str, Callable[[], None]]] = [
            ("memtable", lambda: write(db, model, [random_row(rng, k) for k in range(rng.randint(5, 50))])),
            ("flushed", db.flush),
            ("overwritten and deleted over SSTs", lambda: overwrite(db, model, rng)),
            ("compacted", lambda: (db.flush(), db.table("t").compact())),
            ("indexed", lambda: index(db, rng)),
            ("indexed, overwritten", lambda: overwrite(db, model, rng)),
            ("indexed, flushed", db.flush),
        ]
        checked = 0
        for state, change in states:
            change()
            checked += check_state(db, oracles, rng, seed, state, model)
        assert checked > len(states) * QUERIES_PER_STATE // 2, "most queries must reach a comparison"
    finally:
        db.close()


def overwrite(db: basalt.Database, model: dict[int, dict[str, Any]], rng: random.Random) -> None:
    keys = list(model)
    changed = [random_row(rng, k) for k in rng.sample(keys, k=len(keys) // 3)]
    changed += [random_row(rng, k) for k in range(60, 60 + rng.randint(0, 5))]
    write(db, model, changed)
    doomed = rng.sample(sorted(model), k=min(len(model), rng.randint(0, 4)))
    if doomed:
        db.table("t").delete([(k,) for k in doomed])
        for k in doomed:
            del model[k]


def index(db: basalt.Database, rng: random.Random) -> None:
    for n, column in enumerate(rng.sample(["i", "n", "f", "s", "d", "b", "ts"], k=2)):
        db.sql(f"CREATE INDEX by_{column} ON t ({column})")
        if n == 0 and rng.random() < 0.5:
            db.table("t").drop_index(f"by_{column}")
            db.sql(f"CREATE INDEX by_{column}_again ON t ({column}, id)")


# Negative NaN only here: DataFusion 55 compares floats by IEEE total order
# in WHERE and ORDER BY (-NaN below -inf; DuckDB and PostgreSQL hold every
# NaN equal and above +inf), a divergence not guarded yet, so the shared
# generator leaves it out. Aggregates answer it as SQL does.
AGGREGATE_FLOATS = F64 + [-math.nan, -math.nan]
AGGREGATE_INTS = [2**63 - 1, -(2**63), 2**63 - 2, -(2**63) + 1, 2**62, -(2**62), 0, 1, -1, 7]


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_grouped_aggregates_at_the_edges_match_duckdb(tmp_path: Any, round_: int) -> None:
    """min/max of DOUBLE and REAL groups holding NaN of both signs,
    infinities, both zeros and NULLs, and BIGINT sums near and past the
    limits (refused where DuckDB widens), in the memtable and on disk."""
    seed = SEED + round_
    print(f"aggregates seed {seed} (replay: BASALT_SQL_DIFF_SEED={seed} BASALT_SQL_DIFF_ROUNDS=1)")
    rng = random.Random(seed)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("g", pa.int32()),
                        pa.field("f", pa.float64()), pa.field("r", pa.float32()), pa.field("i", pa.int64())])

    def value(edges: list[Any]) -> Any:
        return None if rng.random() < 0.15 else rng.choice(edges)

    rows = [{"id": k, "g": value(list(range(6))), "f": value(AGGREGATE_FLOATS),
             "r": value([v for v in AGGREGATE_FLOATS if v != 1e300 and v != -1e-300 and v != 5e-324]),
             "i": value(AGGREGATE_INTS if rng.random() < 0.5 else list(range(-9, 10)))}
            for k in range(rng.randint(1, 80))]
    table = pa.Table.from_pylist(rows, schema=schema)
    db = basalt.open(tmp_path / "db")
    duck = duckdb.connect()
    try:
        db.create_table("t", schema, primary_key=["id"])
        db.table("t").write(table)
        duck.register("rows", table)
        duck.execute("CREATE TABLE t AS SELECT * FROM rows")
        for key in ["g", "g % 2", "id % 7", None]:
            for aggregates in ["min(f), max(f), min(r), max(r), count(f)", "sum(i), count(i)",
                               "min(f) FILTER (WHERE i > 0), max(r) FILTER (WHERE i > 0)",
                               "min(DISTINCT f), max(DISTINCT r), sum(DISTINCT i)"]:
                query = (f"SELECT {aggregates} FROM t" if key is None
                         else f"SELECT {key}, {aggregates} FROM t GROUP BY {key} ORDER BY {key} NULLS FIRST")
                for state in ("memtable", "flushed"):
                    where = f"seed {seed} (BASALT_SQL_DIFF_SEED={seed}), {state}: {query}"
                    if state == "flushed":
                        db.flush()
                    expected = comparable(duck.execute(query).to_arrow_table())
                    got = sql_or_sum_refused(db, query, expected, where)
                    if got is not None:
                        assert not sum_out_of_bigint(expected), f"{where}\nBasalt {got}: a sum past BIGINT not refused"
                        assert got == expected, f"{where}\nBasalt {got}\nDuckDB {expected}"
    finally:
        db.close()


@pytest.mark.parametrize("keys", [[0.0, 1.0, -1.5, math.inf, -math.inf, math.nan, 5e-324]])
def test_float_primary_key_matches_duckdb(tmp_path: Any, keys: list[float]) -> None:
    """A DOUBLE primary key: key ranges are not pushed for floats, but the
    engine's filter and its point reads must still compare as SQL does."""
    db = basalt.open(tmp_path / "db")
    duck = duckdb.connect()
    try:
        schema = pa.schema([pa.field("k", pa.float64(), nullable=False), pa.field("v", pa.int64())])
        rows = pa.Table.from_pylist([{"k": k, "v": i} for i, k in enumerate(keys)], schema=schema)
        db.create_table("u", schema, primary_key=["k"])
        db.table("u").write(rows)
        duck.register("rows", rows)
        duck.execute("CREATE TABLE u AS SELECT * FROM rows")
        literals = ["0.0", "-0.0", "1.0", "CAST('NaN' AS DOUBLE)", "CAST('-Infinity' AS DOUBLE)", "0", "-1.5"]
        for flushed in (False, True):
            for literal in literals:
                for op in ["=", "<", "<=", ">", ">=", "<>"]:
                    query = f"SELECT v FROM u WHERE k {op} {literal} ORDER BY v"
                    expected = duck.execute(query).to_arrow_table().column(0).to_pylist()
                    got = db.sql(query).column(0).to_pylist()
                    assert got == expected, f"{query} (flushed: {flushed}): Basalt {got}, DuckDB {expected}"
            assert db.table("u").get((-0.0,)) is not None
            db.flush()
    finally:
        db.close()


# Schema changes between prepare and execute (issue 56): a statement
# prepared before its table changed must fail with "prepare it again", never
# answer through the old layout, and prepared again must agree with DuckDB.
PREPARED_TYPES = {"BIGINT": lambda rng: str(rng.randint(-5, 5)),
                  "INTEGER": lambda rng: str(rng.randint(-5, 5)),
                  "DOUBLE": lambda rng: rng.choice(["1.5", "-2.25", "0.0", "3.0"]),
                  "VARCHAR": lambda rng: rng.choice(["'a'", "'zzz'", "''", "'b'"])}


class PreparedTables:
    """`t (id BIGINT key, …)` and `u (id, w)` in Basalt and DuckDB, with the
    columns `t` has now, changed the same way in both."""

    def __init__(self, db: basalt.Database, rng: random.Random) -> None:
        self.db, self.rng = db, rng
        self.duck = duckdb.connect()
        self.columns: dict[str, str] = {}
        self.made = 0
        self.both("CREATE TABLE u (id BIGINT, w VARCHAR, PRIMARY KEY (id))")
        self.both("INSERT INTO u VALUES " + ", ".join(f"({k}, 'w{k % 3}')" for k in range(0, 30, 2)))
        self.create()

    def both(self, statement: str) -> None:
        self.db.sql(statement)
        self.duck.execute(statement)

    def answer(self, text: str, params: list[int]) -> list[tuple[Any, ...]]:
        """DuckDB's rows of `text`, as `comparable` gives Basalt's."""
        rows = self.duck.execute(text, params).fetchall()
        return [tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row) for row in rows]

    def new_name(self) -> str:
        self.made += 1
        return f"c{self.made}"

    def create(self) -> None:
        self.columns = {self.new_name(): self.rng.choice(list(PREPARED_TYPES)) for _ in range(self.rng.randint(1, 3))}
        spec = ", ".join(f"{name} {kind}" for name, kind in self.columns.items())
        self.both(f"CREATE TABLE t (id BIGINT, {spec}, PRIMARY KEY (id))")
        rows = []
        for k in range(self.rng.randint(3, 20)):
            values = ["NULL" if self.rng.random() < 0.2 else PREPARED_TYPES[kind](self.rng)
                      for kind in self.columns.values()]
            rows.append(f"({k}, {', '.join(values)})")
        self.both("INSERT INTO t VALUES " + ", ".join(rows))

    def change(self) -> str:
        """One change of `t`'s schema, in both; what it was."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.3 or not self.columns:
            name, kind = self.new_name(), rng.choice(list(PREPARED_TYPES))
            self.both(f"ALTER TABLE t ADD COLUMN {name} {kind} DEFAULT {PREPARED_TYPES[kind](rng)}")
            self.columns[name] = kind
            return f"add {name} {kind}"
        name = rng.choice(list(self.columns))
        if roll < 0.55:
            kind = rng.choice([k for k in PREPARED_TYPES if k != self.columns[name]])
            self.both(f"ALTER TABLE t DROP COLUMN {name}")
            self.both(f"ALTER TABLE t ADD COLUMN {name} {kind} DEFAULT {PREPARED_TYPES[kind](rng)}")
            del self.columns[name]
            self.columns[name] = kind
            return f"drop {name} and add it again as {kind}"
        if roll < 0.8:
            renamed = self.new_name()
            self.both(f"ALTER TABLE t RENAME COLUMN {name} TO {renamed}")
            self.columns = {renamed if c == name else c: k for c, k in self.columns.items()}
            return f"rename {name} to {renamed}"
        self.both("DROP TABLE t")
        self.create()
        return "drop t and make it again"

    def statements(self) -> list[tuple[str, list[int], bool]]:
        """(text, parameters, ordered) of every shape over a column of `t` now."""
        rng = self.rng
        c = rng.choice(list(self.columns))
        k = rng.randint(0, 12)
        return [
            (f"SELECT id, {c} FROM t WHERE id = $1", [k], True),
            (f"SELECT * FROM t WHERE id = $1 OR {c} IS NOT NULL", [k], False),
            (f"SELECT id, {c} FROM t WHERE id >= $1 ORDER BY id", [k], True),
            (f"SELECT {c} FROM t WHERE id IN ($1, $2)", [k, k + 1], False),
            (f"SELECT count({c}) AS n, count(*) AS m FROM t WHERE id >= $1", [k], True),
            (f"SELECT t.id, {c}, w FROM t JOIN u ON t.id = u.id WHERE t.id <= $1 ORDER BY t.id", [k], True),
        ]


def test_prepared_statements_across_schema_changes_match_duckdb(tmp_path: Any) -> None:
    seed = SEED
    print(f"prepared across schema changes, seed {seed} (replay: BASALT_SQL_DIFF_SEED={seed})")
    rng = random.Random(seed)
    db = basalt.open(tmp_path / "db")
    try:
        tables = PreparedTables(db, rng)
        agreed = 0
        for step in range(12 * ROUNDS):
            shapes = tables.statements()
            prepared = [(db.prepare(text), text, params, ordered) for text, params, ordered in shapes]
            for statement, text, params, _ in prepared:
                statement.execute(params)  # runs before the change
            change = tables.change()
            where = f"seed {seed} (BASALT_SQL_DIFF_SEED={seed}), step {step}, after {change}"
            for statement, text, params, ordered in prepared:
                with pytest.raises(basalt.InvalidArgumentError, match="prepare it again"):
                    statement.execute(params)
                try:
                    expected = tables.answer(text, params)
                except duckdb.Error:
                    # A column the text names is gone: Basalt refuses too,
                    # when preparing or running, and not as a stale plan.
                    with pytest.raises(basalt.InvalidArgumentError) as refused:
                        db.prepare(text).execute(params)
                    assert "prepare it again" not in str(refused.value), f"{where}: {text}"
                    continue
                got = comparable(db.prepare(text).execute(params))
                if not ordered:
                    expected, got = sorted(expected, key=repr), sorted(got, key=repr)
                assert got == expected, f"{where}: {text} {params}\nBasalt {got}\nDuckDB {expected}"
                agreed += 1
        print(f"{agreed} statements prepared again agreed with DuckDB")
        assert agreed > 0, "some statements must reach a comparison"
    finally:
        db.close()


# Issue 65's reads over tables of many blocks and files: key order handed
# to DataFusion (ORDER BY id [DESC] LIMIT k read from the ends of the key
# range, no sort), index choices by counting (the index taken only below a
# cap), zone maps, aggregates over the whole table, in every state the
# statistics must not be fooled by: unflushed overwrites and deletes over
# SSTs, range deletes, an open snapshot pinning old versions, compaction.
ANALYST_ROUNDS = int(os.environ.get("BASALT_SQL_DIFF_ROUNDS", "2"))


def analyst_queries(rng: random.Random, predicates: Predicates, columns: list[str],
                    top: int) -> list[tuple[str, bool]]:
    """(query, ordered) of the shapes an analyst runs."""
    numeric = [c for c in columns if COLUMNS[c][0] in ("BIGINT", "INTEGER", "DOUBLE", "REAL")]
    ordered = [c for c in columns if c != "b"]
    out: list[tuple[str, bool]] = []
    for _ in range(QUERIES_PER_STATE):
        roll = rng.random()
        k = rng.choice([1, 2, 5, 17, 300, top + 3])
        if roll < 0.25:
            direction = rng.choice(["", " DESC"])
            where = ""
            if rng.random() < 0.4:
                lo, hi = sorted(rng.randint(-5, top + 5) for _ in range(2))
                if rng.random() < 0.15:
                    lo, hi = hi + 1, lo  # an inverted range: nothing
                where = f" WHERE id >= {lo} AND id < {hi}"
            elif rng.random() < 0.3:
                where = f" WHERE {predicates.clause()}"
            projection = rng.choice(["*", "id"] + columns[:1])
            if projection not in ("*", "id"):
                projection = f"id, {projection}"
            out.append((f"SELECT {projection} FROM t{where} ORDER BY id{direction} LIMIT {k}", True))
        elif roll < 0.4:
            column = rng.choice(columns) if columns else "id"
            negated = rng.choice(["", "NOT "])
            where = f"{column} IS {negated}NULL"
            if rng.random() < 0.3:
                where += f" AND ({predicates.clause()})"
            out.append((f"SELECT count(*) AS cnt FROM t WHERE {where}", True))
        elif roll < 0.55:
            if not ordered:
                out.append(("SELECT count(*) AS cnt, min(id) AS lo_v, max(id) AS hi_v FROM t", True))
                continue
            column = rng.choice(ordered)
            where = f" WHERE {predicates.clause()}" if rng.random() < 0.4 else ""
            out.append((f"SELECT min({column}) AS lo_v, max({column}) AS hi_v, count({column}) AS cnt, "
                        f"count(*) AS all_rows FROM t{where}", True))
        elif roll < 0.7:
            out.append((f"SELECT count(*) AS cnt FROM t WHERE {predicates.clause()}", True))
        elif roll < 0.8 and ordered:
            # Top k by a value, ties broken by the key: a unique answer.
            # A float is sorted plus 0.0 (-0.0 becomes 0.0): DataFusion sorts
            # -0.0 before 0.0, DuckDB holds them equal and goes on to the key.
            column = rng.choice(ordered)
            by = f"({column} + 0.0)" if COLUMNS[column][0] in ("DOUBLE", "REAL") else column
            direction = rng.choice(["ASC NULLS FIRST", "DESC NULLS LAST"])
            where = f" WHERE {predicates.clause()}" if rng.random() < 0.4 else ""
            out.append((f"SELECT id, {column} FROM t{where} ORDER BY {by} {direction}, id LIMIT {k}", True))
        elif roll < 0.9 and numeric:
            column = rng.choice(numeric)
            where = f" WHERE {predicates.clause()}" if rng.random() < 0.5 else ""
            total = f"sum({column})" if COLUMNS[column][0] in ("BIGINT", "INTEGER") else f"count({column})"
            out.append((f"SELECT {total} AS total, count(*) AS cnt FROM t{where}", True))
        elif columns:
            key = rng.choice([c for c in columns if COLUMNS[c][0] in ("BOOLEAN", "INTEGER", "VARCHAR", "DATE")]
                             or ["id % 5"])
            measure = rng.choice(ordered) if ordered else "id"
            out.append((f"SELECT {key}, count(*) AS cnt, max({measure}) AS top_v FROM t "
                        f"GROUP BY {key} ORDER BY {key} NULLS FIRST", True))
        else:
            out.append(("SELECT count(*) AS cnt FROM t", True))
    return out


def difference(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> str:
    """Where two answers part, briefly (they can hold thousands of rows)."""
    at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    return (f"Basalt {len(got)} rows, DuckDB {len(expected)}; from row {at}: "
            f"Basalt {got[at:at + 5]}, DuckDB {expected[at:at + 5]}")


@pytest.mark.parametrize("round_", range(ANALYST_ROUNDS))
def test_analyst_reads_over_many_blocks_match_duckdb(tmp_path: Any, round_: int) -> None:
    seed = SEED + 1000 + round_
    print(f"analyst differential seed {seed} (replay: BASALT_SQL_DIFF_SEED={seed - 1000} BASALT_SQL_DIFF_ROUNDS=1)")
    rng = random.Random(seed)
    # A random schema: any subset of the column types, now and then none
    # but the key.
    columns = [] if rng.random() < 0.1 else sorted(rng.sample(list(COLUMNS), k=rng.randint(1, len(COLUMNS))))
    rows_wanted = rng.randint(1500, 5000)
    top = rows_wanted * 3
    # Small blocks and memtables: many blocks and files from few rows.
    db = basalt.open(tmp_path / "db", block_bytes_target=1024, table_block_bytes_target=1024,
                     settled_block_bytes_target=1024,
                     memtable_bytes_max=256 << 10)
    duck = duckdb.connect()
    model: dict[int, dict[str, Any]] = {}
    snapshot = None

    def write_rows(keys: list[int]) -> None:
        rows = [random_row(rng, k, columns) for k in keys]
        db.table("t").write(arrow_of(rows, columns))
        for row in rows:
            model[row["id"]] = row

    def check(state: str) -> int:
        rows = [model[k] for k in sorted(model)]
        expected_rows = arrow_of(rows, columns)
        duck.register("expected_rows", expected_rows)
        duck.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM expected_rows")
        duck.unregister("expected_rows")
        checked = 0
        for query, _ in analyst_queries(rng, Predicates(rng, columns), columns, top):
            where = f"seed {seed} (BASALT_SQL_DIFF_SEED={seed - 1000}), columns {columns}, state {state}: {query}"
            try:
                expected = comparable(duck.sql(query).to_arrow_table())
            except duckdb.Error:
                continue
            got = sql_or_sum_refused(db, query, expected, where)
            if got is None:
                continue
            if got != expected and (signed_zeros(query) or LOSSY_CAST_EQUALITY.search(query)):
                continue  # DataFusion's own answers (see check_state)
            assert got == expected, f"{where}\n{difference(got, expected)}"
            checked += 1
        return checked

    try:
        db.create_table("t", arrow_of([], columns).schema, primary_key=["id"])
        keys = sorted(rng.sample(range(top), k=rows_wanted))
        settled = keys[: len(keys) * 2 // 3]
        loaded = [random_row(rng, k, columns) for k in settled]
        db.table("t").bulk_load(arrow_of(loaded, columns))
        for row in loaded:
            model[row["id"]] = row
        checked = check("bulk-loaded")
        if columns and rng.random() < 0.7:
            for column in rng.sample(columns, k=min(2, len(columns))):
                db.sql(f"CREATE INDEX by_{column} ON t ({column})")
        write_rows(keys[len(settled):])
        db.flush()
        checked += check("indexed, a second run flushed")
        # Unflushed overwrites and deletes over the files, a range delete,
        # and a snapshot holding what they replace.
        snapshot = db.snapshot()
        at_snapshot = dict(model)
        overwritten = rng.sample(sorted(model), k=len(model) // 10)
        write_rows(overwritten + [top + i for i in range(rng.randint(0, 20))])
        doomed = rng.sample(sorted(model), k=min(len(model), rng.randint(0, 40)))
        if doomed:
            db.table("t").delete([(k,) for k in doomed])
            for k in doomed:
                del model[k]
        lo = rng.randint(0, top)
        hi = lo + rng.randint(0, top // 20)
        db.table("t").delete_range((lo,), (hi,))
        for k in [k for k in model if lo <= k < hi]:
            del model[k]
        checked += check("overwrites, deletes and a range delete unflushed, a snapshot open")
        db.flush()
        checked += check("flushed, a snapshot open")
        # Through the snapshot, the rows as they were: those changed since
        # (overwritten, deleted, range-deleted, new) and some others.
        changed = set(overwritten) | set(doomed) | set(range(lo, hi)) | set(range(top, top + 20))
        for k in sorted(changed)[:300] + rng.sample(range(top), k=50):
            old = db.table("t").get((k,), snapshot=snapshot)
            want = at_snapshot.get(k)
            assert (old is None) == (want is None), f"seed {seed}: key {k} through the snapshot: {old}, wanted {want}"
            if old is not None and want is not None:
                assert comparable(arrow_of([old], columns)) == comparable(arrow_of([want], columns)), (
                    f"seed {seed}: key {k} through the snapshot: {old}, wanted {want}")
        snapshot.close()
        snapshot = None
        db.table("t").compact()
        checked += check("compacted")
        assert checked > 2 * QUERIES_PER_STATE, f"seed {seed}: only {checked} queries reached a comparison"
    finally:
        if snapshot is not None:
            snapshot.close()
        db.close()
