"""Tables as Arrow: schemas, writes from every Arrow producer, gets, scans
(projection, filters, key ranges, reverse, batch sizes), atomic writes
with schema checks, bulk loads, secondary indexes and SQL."""

from __future__ import annotations

import datetime as dt
import operator
import pathlib
import random
import struct
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import basalt

# ------------------------------------------------------------ fixtures

ALL_TYPES = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("i64", pa.int64()),
        pa.field("u8", pa.uint8()),
        pa.field("u16", pa.uint16()),
        pa.field("u32", pa.uint32()),
        pa.field("u64", pa.uint64()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("name", pa.utf8()),
        pa.field("blob", pa.binary()),
        pa.field("day", pa.date32()),
        pa.field("at", pa.timestamp("us")),
        pa.field("required", pa.utf8(), nullable=False),
    ]
)

ALL_TYPES_ROWS: list[dict[str, Any]] = [
    {
        "id": -5,
        "i8": -128,
        "i16": -32768,
        "i32": -(2**31),
        "i64": -(2**63),
        "u8": 0,
        "u16": 0,
        "u32": 0,
        "u64": 0,
        "f32": -1.5,
        "f64": -1e300,
        "flag": False,
        "name": "",
        "blob": b"",
        "day": dt.date(1969, 12, 31),
        "at": dt.datetime(1960, 1, 1, 0, 0, 0, 1),
        "required": "min",
    },
    {
        "id": 0,
        "i8": None,
        "i16": None,
        "i32": None,
        "i64": None,
        "u8": None,
        "u16": None,
        "u32": None,
        "u64": None,
        "f32": None,
        "f64": None,
        "flag": None,
        "name": None,
        "blob": None,
        "day": None,
        "at": None,
        "required": "all null",
    },
    {
        "id": 7,
        "i8": 127,
        "i16": 32767,
        "i32": 2**31 - 1,
        "i64": 2**63 - 1,
        "u8": 255,
        "u16": 65535,
        "u32": 2**32 - 1,
        "u64": 2**64 - 1,
        "f32": 3.25,
        "f64": 2.5e-308,
        "flag": True,
        "name": "héllo ✓ wörld",
        "blob": b"\x00\xff\x00binary",
        "day": dt.date(2100, 1, 1),
        "at": dt.datetime(2024, 2, 29, 12, 34, 56, 789012),
        "required": "max",
    },
    {
        "id": 3,
        "i8": 1,
        "i16": 2,
        "i32": 3,
        "i64": 4,
        "u8": 5,
        "u16": 6,
        "u32": 7,
        "u64": 8,
        "f32": 0.0,
        "f64": 3.141592653589793,
        "flag": False,
        "name": "x" * 1000,
        "blob": bytes(range(256)),
        "day": dt.date(1970, 1, 1),
        "at": dt.datetime(1970, 1, 1),
        "required": "",
    },
]


def sorted_rows(rows: list[dict[str, Any]], key: str = "id") -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r[key])


SIMPLE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.utf8(), nullable=False),
        pa.field("score", pa.float64()),
    ]
)


@pytest.fixture
def simple(db: basalt.Database) -> basalt.Table:
    """Table ``simple`` (id int64 key, name utf8 not null, score float64), empty."""
    return db.create_table("simple", SIMPLE, primary_key=["id"])


# Rows of the filter tests: nulls, negatives and duplicates in x and s.
FILTER_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("x", pa.int64()),
        pa.field("s", pa.utf8()),
        pa.field("f", pa.float64()),
    ]
)
FILTER_ROWS = [
    {
        "id": i,
        "x": None if i % 7 == 0 else (i * 37) % 50 - 10,
        "s": None if i % 5 == 0 else "abcde"[i % 5],
        "f": i / 4,
    }
    for i in range(120)
]


@pytest.fixture
def filtered(db: basalt.Database) -> basalt.Table:
    table = db.create_table("filtered", FILTER_SCHEMA, primary_key=["id"])
    table.write(pa.Table.from_pylist(FILTER_ROWS, schema=FILTER_SCHEMA))
    return table


# Composite key (g int32, n int64), negatives included.
COMPOSITE_SCHEMA = pa.schema(
    [
        pa.field("g", pa.int32(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),
        pa.field("v", pa.utf8()),
    ]
)
COMPOSITE_ROWS = [{"g": g, "n": n, "v": f"{g}/{n}"} for g in range(-2, 3) for n in range(-3, 4)]


@pytest.fixture
def composite(db: basalt.Database) -> basalt.Table:
    table = db.create_table("composite", COMPOSITE_SCHEMA, primary_key=["g", "n"])
    # Written in shuffled order: the table keeps key order.
    rows = COMPOSITE_ROWS[::3] + COMPOSITE_ROWS[1::3] + COMPOSITE_ROWS[2::3]
    table.write(pa.Table.from_pylist(rows, schema=COMPOSITE_SCHEMA))
    return table


# Composite key (region utf8, seq int64): string keys of different lengths.
REGION_SCHEMA = pa.schema(
    [
        pa.field("region", pa.utf8(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("amount", pa.float64()),
    ]
)
REGIONS = ["", "a", "b", "b\x00", "bb", "bé", "c", "ü"]
REGION_ROWS = [{"region": r, "seq": s, "amount": float(i * 10 + s)} for i, r in enumerate(REGIONS) for s in (-1, 0, 5)]


@pytest.fixture
def regions(db: basalt.Database) -> basalt.Table:
    table = db.create_table("regions", REGION_SCHEMA, primary_key=["region", "seq"])
    table.write(pa.Table.from_pylist(REGION_ROWS[::-1], schema=REGION_SCHEMA))
    return table


def ids(table: pa.Table, column: str = "id") -> list[Any]:
    return table.column(column).to_pylist()


# --------------------------------------------------------- create_table


def test_create_table_with_many_types_roundtrips(db: basalt.Database) -> None:
    table = db.create_table("all_types", ALL_TYPES, primary_key=["id"])
    assert isinstance(table, basalt.Table)
    assert table.name == "all_types"
    assert table.primary_key == ["id"]
    assert table.schema == ALL_TYPES
    written = table.write(pa.Table.from_pylist(ALL_TYPES_ROWS, schema=ALL_TYPES))
    assert written == len(ALL_TYPES_ROWS)

    result = table.to_arrow()
    assert result.schema == ALL_TYPES
    assert result.to_pylist() == sorted_rows(ALL_TYPES_ROWS)
    for row in ALL_TYPES_ROWS:
        assert table.get(row["id"]) == row
    assert db.tables() == ["all_types"]


# ALL_TYPES' numbers, booleans, strings and bytes (the types Table.get
# converts itself), a date and a timestamp (which it hands to pyarrow
# beside them), and the large string and binary types.
SIMPLE_TYPES = pa.schema(
    [
        f
        for f in ALL_TYPES
        if f.name == "id"
        or (
            f.nullable
            and (
                pa.types.is_integer(f.type)
                or pa.types.is_floating(f.type)
                or f.type in (pa.bool_(), pa.utf8(), pa.binary(), pa.date32(), pa.timestamp("us"))
            )
        )
    ]
    + [pa.field("big_text", pa.large_string()), pa.field("big_raw", pa.large_binary())]
)


def _edge(bits: int, signed: bool) -> st.SearchStrategy[int]:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return st.one_of(st.sampled_from([lo, hi, 0, 1]), st.integers(lo, hi))


_FLOATS = st.one_of(st.sampled_from([0.0, -0.0, float("inf"), float("-inf"), float("nan")]), st.floats())
_SIMPLE_VALUES = {
    "i8": _edge(8, True),
    "i16": _edge(16, True),
    "i32": _edge(32, True),
    "i64": _edge(64, True),
    "u8": _edge(8, False),
    "u16": _edge(16, False),
    "u32": _edge(32, False),
    "u64": _edge(64, False),
    "f32": _FLOATS.map(lambda x: struct.unpack("f", struct.pack("f", x))[0] if abs(x) < 3e38 or x != x else x),
    "f64": _FLOATS,
    "flag": st.booleans(),
    "name": st.text(max_size=20),
    "big_text": st.text(max_size=20),
    "blob": st.binary(max_size=20),
    "day": st.dates(),
    "at": st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)),
    "big_raw": st.binary(max_size=20),
}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries({k: st.one_of(st.none(), v) for k, v in _SIMPLE_VALUES.items()}),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.sampled_from(SIMPLE_TYPES.names), unique=True, max_size=4),
)
def test_get_gives_what_pyarrow_converts(rows: list[dict[str, Any]], columns: list[str]) -> None:
    # Table.get builds the dict of a row of numbers, booleans, strings and
    # bytes itself; it must be exactly pyarrow's to_pylist of that row, in
    # column order, for every edge value, null and projection.
    with tempfile.TemporaryDirectory() as d:
        db = basalt.open(d)
        table = db.create_table("simple", SIMPLE_TYPES, primary_key=["id"])
        assert sorted(_SIMPLE_VALUES) == sorted(SIMPLE_TYPES.names[1:])
        data = [dict(row, id=i) for i, row in enumerate(rows)]
        table.write(pa.Table.from_pylist(data, schema=SIMPLE_TYPES))
        # From the memtable, then from an SST's blocks (packed integers).
        for flushed in (False, True):
            if flushed:
                db.flush()
            for i in range(len(rows)):
                for projection in (None, columns or None):
                    got = table.get(i, columns=projection)
                    want = table.get_many([i], columns=projection).to_pylist()[0]
                    assert got is not None
                    assert list(got) == list(want)
                    assert repr(got) == repr(want)
                    assert [type(v) for v in got.values()] == [type(v) for v in want.values()]
        db.close()


def test_tables_survive_reopen(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        table = db.create_table("all_types", ALL_TYPES, primary_key=["id"])
        table.write(pa.Table.from_pylist(ALL_TYPES_ROWS, schema=ALL_TYPES))
        table.create_index("by_name", ["name"])
    with basalt.open(path) as db:
        assert db.tables() == ["all_types"]
        table = db.table("all_types")
        assert table.schema == ALL_TYPES
        assert table.primary_key == ["id"]
        assert table.to_arrow().to_pylist() == sorted_rows(ALL_TYPES_ROWS)
        assert [i["name"] for i in table.indexes()] == ["by_name"]
        assert ids(table.lookup("by_name", eq="max"), "id") == []
        assert ids(table.lookup("by_name", eq=""), "id") == [-5]


def test_create_table_accepts_arrow_c_schema_objects(db: basalt.Database) -> None:
    class SchemaOnly:
        def __arrow_c_schema__(self) -> object:
            return SIMPLE.__arrow_c_schema__()

    table = db.create_table("via_capsule", SchemaOnly(), primary_key=["id"])
    assert table.schema == SIMPLE


def test_create_table_composite_key(db: basalt.Database) -> None:
    table = db.create_table("c", COMPOSITE_SCHEMA, primary_key=["n", "g"])
    assert table.primary_key == ["n", "g"]


@pytest.mark.parametrize(
    ("schema", "key"),
    [
        (SIMPLE, ["nope"]),  # not a column
        (SIMPLE, []),  # no key
        (SIMPLE, ["id", "id"]),  # twice
    ],
    ids=["unknown-column", "empty-key", "repeated-column"],
)
def test_create_table_bad_key_is_invalid_argument(db: basalt.Database, schema: pa.Schema, key: list[str]) -> None:
    with pytest.raises(basalt.InvalidArgumentError):
        db.create_table("bad", schema, primary_key=key)
    assert db.tables() == []


def test_key_columns_are_not_null_whatever_the_schema_says(db: basalt.Database) -> None:
    # pyarrow makes every field nullable unless told otherwise: the first
    # schema a Python user writes. As SQL's PRIMARY KEY implies NOT NULL,
    # the key column is stored non-nullable and a null in it is refused.
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    table = db.create_table("people", schema, primary_key=["id"])
    assert not table.schema.field("id").nullable
    assert table.schema.field("name").nullable
    table.write(pa.table({"id": [1, 2], "name": ["a", None]}))
    with pytest.raises(basalt.SchemaError, match="id"):
        table.write(pa.table({"id": [3, None], "name": ["c", "d"]}))
    with pytest.raises(basalt.SchemaError, match="id"):
        table.bulk_load(pa.table({"id": [None], "name": ["e"]}))
    assert table.to_arrow().column("id").to_pylist() == [1, 2]


def test_create_table_twice_and_missing_table(db: basalt.Database) -> None:
    db.create_table("t", SIMPLE, primary_key=["id"])
    with pytest.raises(basalt.InvalidArgumentError):
        db.create_table("t", SIMPLE, primary_key=["id"])
    with pytest.raises(basalt.InvalidArgumentError):
        db.table("missing")


def test_create_table_rejects_non_schema(db: basalt.Database) -> None:
    with pytest.raises(TypeError):
        db.create_table("t", {"id": "int64"}, primary_key=["id"])
    assert db.tables() == []


def test_drop_table(db: basalt.Database) -> None:
    table = db.create_table("t", SIMPLE, primary_key=["id"])
    table.write({"id": [1], "name": ["a"]})
    with pytest.raises(basalt.BusyError):
        db.drop_table("t")  # a handle is alive
    del table
    db.drop_table("t")
    assert db.tables() == []
    with pytest.raises(basalt.InvalidArgumentError):
        db.table("t")
    again = db.create_table("t", SIMPLE, primary_key=["id"])
    assert again.to_arrow().num_rows == 0


# --------------------------------------------------------- write sources

SIMPLE_DATA = {"id": [3, 1, 2], "name": ["three", "one", "two"], "score": [3.5, 1.5, 2.5]}
SIMPLE_EXPECTED = [
    {"id": 1, "name": "one", "score": 1.5},
    {"id": 2, "name": "two", "score": 2.5},
    {"id": 3, "name": "three", "score": 3.5},
]


class StreamOnly:
    """Anything with ``__arrow_c_stream__`` (the PyCapsule interface)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.table.__arrow_c_stream__(requested_schema)


class ArrayOnly:
    """Anything with ``__arrow_c_array__`` (one record batch)."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.batch = batch

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        return self.batch.__arrow_c_array__(requested_schema)


WRITE_SOURCES: dict[str, Callable[[], Any]] = {
    "pyarrow.Table": lambda: pa.table(SIMPLE_DATA, schema=SIMPLE),
    "pyarrow.Table chunked": lambda: pa.Table.from_batches(
        [pa.record_batch({k: v[:1] for k, v in SIMPLE_DATA.items()}, schema=SIMPLE),
         pa.record_batch({k: v[1:] for k, v in SIMPLE_DATA.items()}, schema=SIMPLE)]
    ),
    "pyarrow.RecordBatch": lambda: pa.record_batch(SIMPLE_DATA, schema=SIMPLE),
    "pyarrow.RecordBatchReader": lambda: pa.RecordBatchReader.from_batches(
        SIMPLE, pa.table(SIMPLE_DATA, schema=SIMPLE).to_batches(max_chunksize=1)
    ),
    "pandas.DataFrame": lambda: pd.DataFrame(SIMPLE_DATA),
    "polars.DataFrame": lambda: pl.DataFrame(SIMPLE_DATA),
    "dict of lists": lambda: dict(SIMPLE_DATA),
    "__arrow_c_stream__": lambda: StreamOnly(pa.table(SIMPLE_DATA)),
    "__arrow_c_array__": lambda: ArrayOnly(pa.record_batch(SIMPLE_DATA)),
    "large_string and int32": lambda: pa.table(
        {
            "id": pa.array(SIMPLE_DATA["id"], pa.int32()),
            "name": pa.array(SIMPLE_DATA["name"], pa.large_string()),
            "score": pa.array(SIMPLE_DATA["score"], pa.float32()),
        }
    ),
    "dictionary strings": lambda: pa.table(
        {
            "id": SIMPLE_DATA["id"],
            "name": pa.array(SIMPLE_DATA["name"]).dictionary_encode(),
            "score": SIMPLE_DATA["score"],
        }
    ),
    "columns in another order": lambda: pa.table(
        {"score": SIMPLE_DATA["score"], "name": SIMPLE_DATA["name"], "id": SIMPLE_DATA["id"]}
    ),
}


@pytest.mark.parametrize("source", list(WRITE_SOURCES))
def test_write_accepts_arrow_producers(simple: basalt.Table, source: str) -> None:
    data = WRITE_SOURCES[source]()
    assert simple.write(data) == 3
    assert simple.to_arrow().to_pylist() == SIMPLE_EXPECTED
    assert simple.to_arrow().schema == SIMPLE


def test_write_fills_missing_nullable_columns_with_null(simple: basalt.Table) -> None:
    simple.write({"id": [1], "name": ["one"], "score": [1.0]})
    # An upsert replaces the whole row: the absent nullable column is null.
    simple.write({"id": [1, 2], "name": ["uno", "dos"]})
    assert simple.to_arrow().to_pylist() == [
        {"id": 1, "name": "uno", "score": None},
        {"id": 2, "name": "dos", "score": None},
    ]


def test_write_empty_data(simple: basalt.Table) -> None:
    assert simple.write(pa.table({"id": [], "name": [], "score": []}, schema=SIMPLE)) == 0
    assert simple.to_arrow().num_rows == 0


def test_write_sync(simple: basalt.Table) -> None:
    assert simple.write(SIMPLE_DATA, sync=True) == 3
    assert simple.get(2) == {"id": 2, "name": "two", "score": 2.5}


# ---------------------------------------------------- upsert & atomicity


def test_upsert_keeps_the_last_write(simple: basalt.Table) -> None:
    simple.write({"id": [1, 2], "name": ["a", "b"], "score": [1.0, 2.0]})
    simple.write({"id": [2, 3], "name": ["B", "c"], "score": [20.0, 3.0]})
    assert simple.to_arrow().to_pylist() == [
        {"id": 1, "name": "a", "score": 1.0},
        {"id": 2, "name": "B", "score": 20.0},
        {"id": 3, "name": "c", "score": 3.0},
    ]


def test_upsert_within_one_write_keeps_the_later_row(simple: basalt.Table) -> None:
    simple.write({"id": [5, 5, 5], "name": ["first", "second", "third"], "score": [1.0, 2.0, 3.0]})
    assert simple.to_arrow().to_pylist() == [{"id": 5, "name": "third", "score": 3.0}]


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])


def test_null_in_non_nullable_column_writes_nothing(simple: basalt.Table) -> None:
    simple.write({"id": [1], "name": ["before"], "score": [1.0]})
    loose = _nullable(SIMPLE)
    good = pa.record_batch({"id": [10, 11], "name": ["ok", "ok"], "score": [1.0, 2.0]}, schema=loose)
    bad = pa.record_batch({"id": [12, 1], "name": ["ok", None], "score": [3.0, 4.0]}, schema=loose)
    with pytest.raises(basalt.SchemaError, match="name"):
        simple.write(pa.Table.from_batches([good, bad]))
    with pytest.raises(basalt.SchemaError):
        simple.write(pa.RecordBatchReader.from_batches(loose, [good, bad]))
    assert simple.to_arrow().to_pylist() == [{"id": 1, "name": "before", "score": 1.0}]


def test_null_key_writes_nothing(simple: basalt.Table) -> None:
    with pytest.raises(basalt.SchemaError, match="id"):
        simple.write(pa.table({"id": [1, None], "name": ["a", "b"]}))
    assert simple.to_arrow().num_rows == 0


def test_extra_column_is_schema_error(simple: basalt.Table) -> None:
    with pytest.raises(basalt.SchemaError, match="extra"):
        simple.write({"id": [1], "name": ["a"], "extra": [1]})
    assert simple.to_arrow().num_rows == 0


def test_missing_required_column_is_schema_error(simple: basalt.Table) -> None:
    with pytest.raises(basalt.SchemaError, match="name"):
        simple.write({"id": [1], "score": [1.0]})
    assert simple.to_arrow().num_rows == 0


@pytest.mark.parametrize(
    "data",
    [
        {"id": ["1", "2"], "name": ["a", "b"]},  # str data for the int key
        {"id": [1, 2], "name": [1, 2]},  # int data for a str column
        {"id": [1, 2], "name": ["a", "b"], "score": ["1.5", "2"]},  # str for float
        {"id": [1.0, 2.0], "name": ["a", "b"]},  # float for the int key
        {"id": [1, 2], "name": [b"a", b"b"]},  # binary for utf8
    ],
    ids=["str-for-int", "int-for-str", "str-for-float", "float-for-int", "binary-for-str"],
)
def test_wrong_column_type_is_schema_error(simple: basalt.Table, data: dict[str, list[Any]]) -> None:
    simple.write({"id": [99], "name": ["kept"]})
    with pytest.raises(basalt.SchemaError):
        simple.write(data)
    assert simple.to_arrow().to_pylist() == [{"id": 99, "name": "kept", "score": None}]


@pytest.mark.parametrize(
    ("column", "bad", "fits"),
    [
        ("i8", [1, 300], 127),
        ("i8", [-129, 0], -128),
        ("u8", [0, -1], 255),
        ("u16", [70000, 1], 65535),
        ("i32", [2**31, 0], -(2**31)),
    ],
    ids=["i8-300", "i8-minus-129", "u8-minus-1", "u16-70000", "i32-2^31"],
)
def test_int_overflow_is_an_error_and_writes_nothing(db: basalt.Database, column: str, bad: list[int], fits: int) -> None:
    table = db.create_table("all_types", ALL_TYPES, primary_key=["id"])
    # The int64 data of a dict of lists is narrowed with overflow checked.
    with pytest.raises(basalt.SchemaError):
        table.write({"id": [1, 2], column: bad, "required": ["r", "r"]})
    assert table.to_arrow().num_rows == 0
    # A value in range is narrowed, not refused.
    table.write({"id": [1], column: [fits], "required": ["r"]})
    assert (table.get(1) or {})[column] == fits


def test_write_of_non_arrow_data_is_typeerror(simple: basalt.Table) -> None:
    for bad in (42, "id,name\n1,a", object()):
        with pytest.raises(TypeError):
            simple.write(bad)
    assert simple.to_arrow().num_rows == 0


# ----------------------------------------------------------------- get


def test_get_returns_dict_or_none(simple: basalt.Table) -> None:
    simple.write(SIMPLE_DATA)
    assert simple.get(1) == {"id": 1, "name": "one", "score": 1.5}
    assert list(simple.get(1) or {}) == ["id", "name", "score"]  # schema order
    assert simple.get(4) is None
    assert simple.get(-1) is None


def test_get_with_columns(simple: basalt.Table) -> None:
    simple.write(SIMPLE_DATA)
    assert simple.get(2, columns=["name"]) == {"name": "two"}
    got = simple.get(2, columns=["score", "id"])
    assert got == {"score": 2.5, "id": 2}
    assert list(got or {}) == ["score", "id"]
    with pytest.raises(basalt.InvalidArgumentError):
        simple.get(2, columns=["nope"])


def test_get_composite_key_as_tuple(composite: basalt.Table) -> None:
    assert composite.get((1, -2)) == {"g": 1, "n": -2, "v": "1/-2"}
    assert composite.get([-2, 3]) == {"g": -2, "n": 3, "v": "-2/3"}
    assert composite.get((1, 100)) is None
    assert composite.get((0, 0), columns=["v"]) == {"v": "0/0"}


def test_get_composite_key_with_wrong_arity(composite: basalt.Table) -> None:
    for bad in ((1,), (1, 2, 3), 1):
        with pytest.raises(basalt.InvalidArgumentError):
            composite.get(bad)


def test_get_string_composite_key(regions: basalt.Table) -> None:
    assert regions.get(("b\x00", 5)) == {"region": "b\x00", "seq": 5, "amount": 35.0}
    assert regions.get(("", -1)) == {"region": "", "seq": -1, "amount": -1.0}
    assert regions.get(("b", 1)) is None


@pytest.mark.parametrize("bad", ["1", b"1", 1.5, dt.date(2020, 1, 1), True], ids=repr)
def test_get_with_key_of_wrong_type_is_typeerror(simple: basalt.Table, bad: Any) -> None:
    simple.write(SIMPLE_DATA)
    with pytest.raises(TypeError):
        simple.get(bad)


def test_get_with_integral_float_key(simple: basalt.Table) -> None:
    simple.write(SIMPLE_DATA)
    assert simple.get(1.0) == simple.get(1)


def test_get_with_none_key_is_invalid(simple: basalt.Table) -> None:
    with pytest.raises(basalt.InvalidArgumentError):
        simple.get(None)


def test_get_typed_keys(db: basalt.Database) -> None:
    schema = pa.schema(
        [
            pa.field("day", pa.date32(), nullable=False),
            pa.field("at", pa.timestamp("us"), nullable=False),
            pa.field("name", pa.utf8(), nullable=False),
            pa.field("raw", pa.binary(), nullable=False),
            pa.field("small", pa.int8(), nullable=False),
            pa.field("v", pa.int64()),
        ]
    )
    table = db.create_table("typed", schema, primary_key=["day", "at", "name", "raw", "small"])
    key = (dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5, 6), "n", b"\x00r", -3)
    table.write(
        pa.table(
            {"day": [key[0]], "at": [key[1]], "name": [key[2]], "raw": [key[3]], "small": [key[4]], "v": [42]},
            schema=schema,
        )
    )
    assert table.get(key) == {"day": key[0], "at": key[1], "name": "n", "raw": b"\x00r", "small": -3, "v": 42}
    with pytest.raises(TypeError):
        table.get((dt.date(2024, 1, 2), dt.datetime(2024, 1, 2), "n", b"\x00r", 300))  # 300 overflows int8


# ------------------------------------------------------------ get_many


def test_get_many_in_order_asked_missing_left_out(simple: basalt.Table) -> None:
    simple.write(SIMPLE_DATA)
    got = simple.get_many([3, 99, 1, -4, 2])
    assert isinstance(got, pa.Table)
    assert got.schema == SIMPLE
    assert ids(got) == [3, 1, 2]
    assert got.to_pylist()[0] == {"id": 3, "name": "three", "score": 3.5}
    assert simple.get_many([]).num_rows == 0
    assert simple.get_many([42]).num_rows == 0


def test_get_many_columns_and_arrow_keys(simple: basalt.Table) -> None:
    simple.write(SIMPLE_DATA)
    got = simple.get_many([2, 1], columns=["name"])
    assert got.column_names == ["name"]
    assert got.column("name").to_pylist() == ["two", "one"]
    assert ids(simple.get_many(pa.table({"id": [2, 7, 3]}))) == [2, 3]
    assert ids(simple.get_many(iter([1]))) == [1]


def test_get_many_composite(composite: basalt.Table) -> None:
    got = composite.get_many([(2, 3), (0, 0), (9, 9), (-2, -3)])
    assert list(zip(got.column("g").to_pylist(), got.column("n").to_pylist())) == [(2, 3), (0, 0), (-2, -3)]


def test_get_many_wrong_key_type(simple: basalt.Table) -> None:
    with pytest.raises(TypeError):
        simple.get_many([1, "2"])


# ---------------------------------------------------------------- scan

OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@pytest.mark.parametrize("op", list(OPS))
def test_scan_where_each_comparison(filtered: basalt.Table, op: str) -> None:
    for value in (12, -10, 0, 1000):
        expected = [r["id"] for r in FILTER_ROWS if r["x"] is not None and OPS[op](r["x"], value)]
        got = filtered.to_arrow(where=[("x", op, value)])
        assert ids(got) == expected, (op, value)
    expected = [r["id"] for r in FILTER_ROWS if r["s"] is not None and OPS[op](r["s"], "c")]
    assert ids(filtered.to_arrow(where=[("s", op, "c")])) == expected
    expected = [r["id"] for r in FILTER_ROWS if OPS[op](r["f"], 7.25)]
    assert ids(filtered.to_arrow(where=[("f", op, 7.25)])) == expected
    expected = [r["id"] for r in FILTER_ROWS if OPS[op](r["id"], 33)]
    assert ids(filtered.to_arrow(where=[("id", op, 33)])) == expected


@pytest.mark.parametrize("op", ["is null", "IS NULL", "is not null", "Is Not Null"])
def test_scan_where_null_checks(filtered: basalt.Table, op: str) -> None:
    want_null = "not" not in op.lower()
    for column in ("x", "s"):
        expected = [r["id"] for r in FILTER_ROWS if (r[column] is None) == want_null]
        assert ids(filtered.to_arrow(where=[(column, op)])) == expected


def test_scan_where_conditions_all_hold(filtered: basalt.Table) -> None:
    where = [("x", ">=", 0), ("s", "!=", "b"), ("f", "<", 20), ("s", "is not null")]
    expected = [
        r["id"]
        for r in FILTER_ROWS
        if r["x"] is not None and r["x"] >= 0 and r["s"] is not None and r["s"] != "b" and r["f"] < 20
    ]
    assert expected  # the case is not vacuous
    assert ids(filtered.to_arrow(where=where)) == expected
    assert ids(filtered.to_arrow(where=[])) == [r["id"] for r in FILTER_ROWS]


def test_scan_where_int_literal_on_float_column(filtered: basalt.Table) -> None:
    assert ids(filtered.to_arrow(where=[("f", ">", 29)])) == [r["id"] for r in FILTER_ROWS if r["f"] > 29]


def test_scan_where_errors(filtered: basalt.Table) -> None:
    with pytest.raises(basalt.InvalidArgumentError):
        filtered.scan(where=[("nope", "=", 1)])
    with pytest.raises(basalt.InvalidArgumentError):
        filtered.scan(where=[("x", "~", 1)])
    with pytest.raises(basalt.InvalidArgumentError):
        filtered.scan(where=[("x", "=", None)])
    with pytest.raises(TypeError):
        filtered.scan(where=[("x", "=", "twelve")])
    with pytest.raises(TypeError):
        filtered.scan(where=["x = 1"])
    with pytest.raises(TypeError):
        filtered.scan(where=[("x", "=", 1, 2)])
    with pytest.raises(TypeError):
        filtered.scan(where=[("x", "=")])


def test_scan_columns(filtered: basalt.Table) -> None:
    got = filtered.to_arrow(columns=["s", "id"])
    assert got.column_names == ["s", "id"]
    assert got.to_pylist() == [{"s": r["s"], "id": r["id"]} for r in FILTER_ROWS]
    scan = filtered.scan(columns=["f"])
    assert scan.schema == pa.schema([pa.field("f", pa.float64())])
    # Filter on a column not projected.
    got = filtered.to_arrow(columns=["id"], where=[("s", "=", "a")])
    assert got.column_names == ["id"]
    assert ids(got) == [r["id"] for r in FILTER_ROWS if r["s"] == "a"]
    with pytest.raises(basalt.InvalidArgumentError):
        filtered.to_arrow(columns=["nope"])


def test_scan_start_end_single_key(filtered: basalt.Table) -> None:
    all_ids = [r["id"] for r in FILTER_ROWS]
    assert ids(filtered.to_arrow(start=10, end=20)) == list(range(10, 20))
    assert ids(filtered.to_arrow(start=100)) == list(range(100, 120))
    assert ids(filtered.to_arrow(end=5)) == list(range(5))
    assert ids(filtered.to_arrow(start=5, end=5)) == []
    assert ids(filtered.to_arrow(start=-100, end=1000)) == all_ids
    assert ids(filtered.to_arrow(start=20, end=10)) == []
    assert ids(filtered.to_arrow(start=(10,), end=(12,))) == [10, 11]
    with pytest.raises(TypeError):
        filtered.scan(start="10")


def _in_range(key: tuple[Any, ...], start: Any, end: Any) -> bool:
    as_tuple = lambda b: b if isinstance(b, tuple) else (b,)  # noqa: E731
    return (start is None or key >= as_tuple(start)) and (end is None or key < as_tuple(end))


COMPOSITE_RANGES = [
    {"start": (1,), "end": (2,)},
    {"start": 1, "end": 2},
    {"start": (0, 1), "end": (2,)},
    {"start": (-1,), "end": (1, 0)},
    {"start": (0,)},
    {"end": (0,)},
    {"start": (-2, -3), "end": (-2, -1)},
    {"start": (2, 3), "end": (2, 4)},
    {"start": (2, 4)},
    {"start": (0, 0), "end": (0, 0)},
    {},
]


@pytest.mark.parametrize("bounds", COMPOSITE_RANGES, ids=repr)
def test_scan_composite_key_prefix_ranges(composite: basalt.Table, bounds: dict[str, Any]) -> None:
    key = lambda r: (r["g"], r["n"])  # noqa: E731
    expected = sorted(
        (key(r) for r in COMPOSITE_ROWS if _in_range(key(r), bounds.get("start"), bounds.get("end")))
    )
    got = composite.to_arrow(**bounds)
    assert list(zip(got.column("g").to_pylist(), got.column("n").to_pylist())) == expected
    rev = composite.to_arrow(reverse=True, **bounds)
    assert list(zip(rev.column("g").to_pylist(), rev.column("n").to_pylist())) == expected[::-1]


REGION_RANGES = [
    {"start": ("b",), "end": ("c",)},
    {"start": ("b",), "end": ("b\x00",)},
    {"start": ("b", 0), "end": ("bb", 0)},
    {"start": ("",), "end": ("a",)},
    {"start": ("bé",)},
    {"end": ("b", 5)},
    {"start": "b", "end": "bb"},
]


@pytest.mark.parametrize("bounds", REGION_RANGES, ids=repr)
def test_scan_string_composite_key_ranges(regions: basalt.Table, bounds: dict[str, Any]) -> None:
    key = lambda r: (r["region"], r["seq"])  # noqa: E731
    expected = sorted(key(r) for r in REGION_ROWS if _in_range(key(r), bounds.get("start"), bounds.get("end")))
    got = regions.to_arrow(**bounds)
    assert list(zip(got.column("region").to_pylist(), got.column("seq").to_pylist())) == expected
    rev = regions.to_arrow(reverse=True, **bounds)
    assert list(zip(rev.column("region").to_pylist(), rev.column("seq").to_pylist())) == expected[::-1]


def test_scan_reverse_is_exact_reverse(filtered: basalt.Table) -> None:
    for kwargs in (
        {},
        {"start": 17, "end": 93},
        {"where": [("x", ">", 0)]},
        {"columns": ["s", "id"], "where": [("s", "is null")]},
        {"start": 50, "where": [("f", "<=", 20.0)]},
    ):
        forward = filtered.to_arrow(**kwargs)
        backward = filtered.to_arrow(reverse=True, **kwargs)
        assert backward.to_pylist() == forward.to_pylist()[::-1], kwargs
        assert backward.schema == forward.schema


def test_scan_reverse_of_a_large_table(db: basalt.Database) -> None:
    # Over 64K rows: the reverse scan reads the range in several parts.
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64(), nullable=False)])
    table = db.create_table("big", schema, primary_key=["id"])
    n = 150_000
    table.write(pa.table({"id": pa.array(range(n)), "v": pa.array(range(0, 2 * n, 2))}, schema=schema))
    db.flush()
    backward = table.to_arrow(reverse=True)
    assert backward.num_rows == n
    assert backward.column("id").to_pylist() == list(range(n - 1, -1, -1))
    assert backward.column("v").to_pylist() == list(range(2 * (n - 1), -1, -2))
    part = table.to_arrow(start=1000, end=140_000, reverse=True)
    assert part.column("id").to_pylist() == list(range(139_999, 999, -1))


@pytest.mark.parametrize("batch_size", [1, 7, 64, 1000])
def test_scan_batch_size(filtered: basalt.Table, batch_size: int) -> None:
    for reverse in (False, True):
        batches = list(filtered.scan(batch_size=batch_size, reverse=reverse))
        assert batches, "no batches"
        assert all(isinstance(b, pa.RecordBatch) for b in batches)
        sizes = [b.num_rows for b in batches]
        assert max(sizes) <= batch_size, sizes
        assert sum(sizes) == len(FILTER_ROWS)
        got = [i for b in batches for i in b.column("id").to_pylist()]
        expected = [r["id"] for r in FILTER_ROWS]
        assert got == (expected[::-1] if reverse else expected)


def test_scan_batch_size_zero_is_invalid(filtered: basalt.Table) -> None:
    with pytest.raises(basalt.InvalidArgumentError):
        filtered.scan(batch_size=0)


def test_scan_object_behaves_like_a_record_batch_reader(filtered: basalt.Table) -> None:
    scan = filtered.scan(batch_size=50)
    assert isinstance(scan, basalt.Scan)
    assert scan.schema == FILTER_SCHEMA
    assert isinstance(scan.plan, str)
    first = scan.read_next_batch()
    assert first.num_rows == 50
    rest = scan.read_all()
    assert isinstance(rest, pa.Table)
    assert ids(rest) == list(range(50, 120))
    with pytest.raises(StopIteration):
        scan.read_next_batch()
    assert list(scan) == []

    df = filtered.scan().read_pandas()
    assert isinstance(df, pd.DataFrame)
    assert df["id"].tolist() == list(range(120))

    reader = filtered.scan(columns=["id"]).to_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert ids(reader.read_all()) == list(range(120))

    with filtered.scan(batch_size=10) as scan:
        next(scan)
    assert list(scan) == []  # closed by the with block

    empty = filtered.scan(start=1000)
    assert empty.read_all().num_rows == 0
    assert empty.read_all().schema == FILTER_SCHEMA


def test_scan_read_all_of_empty_table_keeps_schema(simple: basalt.Table) -> None:
    got = simple.to_arrow()
    assert got.num_rows == 0
    assert got.schema == SIMPLE


def test_pyarrow_reads_the_table_and_scans_through_the_c_stream(filtered: basalt.Table) -> None:
    expected = filtered.to_arrow()
    assert expected.to_pylist() == FILTER_ROWS
    assert pa.table(filtered).to_pylist() == FILTER_ROWS
    reader = pa.RecordBatchReader.from_stream(filtered.scan())
    assert reader.schema == FILTER_SCHEMA
    assert reader.read_all().to_pylist() == FILTER_ROWS
    projected = pa.RecordBatchReader.from_stream(filtered.scan(columns=["id"], where=[("x", "is null")]))
    assert ids(projected.read_all()) == [r["id"] for r in FILTER_ROWS if r["x"] is None]
    assert pa.table(filtered.scan(reverse=True)).to_pylist() == FILTER_ROWS[::-1]
    # The scan's schema capsule.
    assert pa.schema(filtered.scan()) == FILTER_SCHEMA


def test_a_scan_is_spent_after_export(filtered: basalt.Table) -> None:
    scan = filtered.scan()
    assert pa.table(scan).num_rows == 120
    assert list(scan) == []


def test_to_pandas_and_to_polars(filtered: basalt.Table) -> None:
    df = filtered.to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["id", "x", "s", "f"]
    assert df["id"].tolist() == list(range(120))
    assert df["f"].tolist() == [r["f"] for r in FILTER_ROWS]
    df = filtered.to_pandas(columns=["id"], where=[("s", "=", "b")], reverse=True)
    assert df["id"].tolist() == [r["id"] for r in FILTER_ROWS if r["s"] == "b"][::-1]

    pdf = filtered.to_polars()
    assert isinstance(pdf, pl.DataFrame)
    assert pdf.columns == ["id", "x", "s", "f"]
    assert pdf["id"].to_list() == list(range(120))
    assert pdf["x"].to_list() == [r["x"] for r in FILTER_ROWS]
    assert pdf["s"].to_list() == [r["s"] for r in FILTER_ROWS]
    pdf = filtered.to_polars(start=10, end=15, columns=["f"])
    assert pdf.columns == ["f"]
    assert pdf["f"].to_list() == [i / 4 for i in range(10, 15)]


def test_to_arrow_keyword_arguments(filtered: basalt.Table) -> None:
    got = filtered.to_arrow(columns=["id", "x"], where=[("x", "<", 0)], start=10, end=100, reverse=True)
    expected = [{"id": r["id"], "x": r["x"]} for r in FILTER_ROWS if 10 <= r["id"] < 100 and r["x"] is not None and r["x"] < 0]
    assert got.to_pylist() == expected[::-1]


# --------------------------------------------------------------- delete


def test_delete_keys(simple: basalt.Table) -> None:
    simple.write({"id": list(range(10)), "name": [str(i) for i in range(10)]})
    simple.delete([1, 3, 999])
    assert ids(simple.to_arrow()) == [0, 2, 4, 5, 6, 7, 8, 9]
    simple.delete(pa.table({"id": [4, 5]}))
    assert ids(simple.to_arrow()) == [0, 2, 6, 7, 8, 9]
    simple.delete(iter([6]), sync=True)
    simple.delete([])
    assert ids(simple.to_arrow()) == [0, 2, 7, 8, 9]
    assert simple.get(1) is None
    # Deleted, then written again.
    simple.write({"id": [1], "name": ["back"]})
    assert simple.get(1) == {"id": 1, "name": "back", "score": None}


def test_delete_composite_keys(composite: basalt.Table) -> None:
    composite.delete([(0, 0), (1, -3), (5, 5)])
    remaining = composite.to_arrow()
    keys = list(zip(remaining.column("g").to_pylist(), remaining.column("n").to_pylist()))
    assert (0, 0) not in keys and (1, -3) not in keys
    assert len(keys) == len(COMPOSITE_ROWS) - 2


def test_delete_with_bad_keys_deletes_nothing(simple: basalt.Table, composite: basalt.Table) -> None:
    simple.write(SIMPLE_DATA)
    with pytest.raises(TypeError):
        simple.delete([1, "2"])
    with pytest.raises(basalt.InvalidArgumentError):
        simple.delete([1, None])
    with pytest.raises(basalt.InvalidArgumentError):
        composite.delete([(0, 0), (1,)])
    assert ids(simple.to_arrow()) == [1, 2, 3]
    assert composite.to_arrow().num_rows == len(COMPOSITE_ROWS)


# ------------------------------------------------- batches and snapshots


def test_write_batch_with_tables_and_keys_is_atomic(db: basalt.Database, simple: basalt.Table) -> None:
    simple.write({"id": [1, 2], "name": ["a", "b"]})
    with db.write_batch() as batch:
        batch.put(b"k", b"v")
        batch.write(simple, {"id": [3], "name": ["c"]})
        batch.delete_rows(simple, [1])
        assert simple.get(3) is None  # not yet
    assert db[b"k"] == b"v"
    assert ids(simple.to_arrow()) == [2, 3]

    with pytest.raises(KeyError):
        with db.write_batch() as batch:
            batch.put(b"k2", b"v")
            batch.write(simple, {"id": [4], "name": ["d"]})
            batch.delete_rows(simple, [2])
            raise KeyError("abort")
    assert b"k2" not in db
    assert ids(simple.to_arrow()) == [2, 3]

    batch = db.write_batch()
    with pytest.raises(basalt.SchemaError):
        batch.write(simple, {"id": [5], "name": [None]})
    assert len(batch) == 0


def test_table_reads_at_a_snapshot(db: basalt.Database, simple: basalt.Table) -> None:
    simple.write({"id": [1, 2], "name": ["a", "b"]})
    with db.snapshot() as snap:
        simple.write({"id": [1, 3], "name": ["A", "c"]})
        simple.delete([2])
        assert simple.get(1, snapshot=snap) == {"id": 1, "name": "a", "score": None}
        assert simple.get(2, snapshot=snap) == {"id": 2, "name": "b", "score": None}
        assert simple.get(3, snapshot=snap) is None
        assert simple.to_arrow(snapshot=snap).column("name").to_pylist() == ["a", "b"]
        assert ids(simple.to_arrow(snapshot=snap, reverse=True)) == [2, 1]
        assert ids(simple.to_arrow()) == [1, 3]


# ------------------------------------------------------------ bulk_load


def test_bulk_load_reader_of_several_batches(simple: basalt.Table) -> None:
    def batches() -> Iterator[pa.RecordBatch]:
        for b in range(5):
            start = b * 1000
            yield pa.record_batch(
                {
                    "id": list(range(start, start + 1000)),
                    "name": [f"n{i}" for i in range(start, start + 1000)],
                    "score": [i / 2 for i in range(start, start + 1000)],
                },
                schema=SIMPLE,
            )

    reader = pa.RecordBatchReader.from_batches(SIMPLE, batches())
    assert simple.bulk_load(reader) == 5000
    got = simple.to_arrow()
    assert ids(got) == list(range(5000))
    assert simple.get(4321) == {"id": 4321, "name": "n4321", "score": 2160.5}
    assert simple.bulk_load(pa.table(SIMPLE_DATA, schema=SIMPLE), sync=False) == 3
    assert simple.get(2) == {"id": 2, "name": "two", "score": 2.5}


def test_bulk_load_bad_batch_raises_schema_error(simple: basalt.Table) -> None:
    loose = _nullable(SIMPLE)
    good = pa.record_batch({"id": [1], "name": ["a"], "score": [1.0]}, schema=loose)
    bad = pa.record_batch({"id": [2], "name": [None], "score": [1.0]}, schema=loose)
    with pytest.raises(basalt.SchemaError):
        simple.bulk_load(pa.RecordBatchReader.from_batches(loose, [good, bad]))
    # The load is atomic: the good batch before the bad one is not there.
    assert simple.get(1) is None
    assert simple.get(2) is None
    assert simple.to_arrow().num_rows == 0


def test_bulk_load_in_any_order_matches_writes(db: basalt.Database) -> None:
    """Batches out of key order, overlapping, with keys repeated: the load
    must read back exactly as the same batches written one by one."""
    rng = random.Random(7)
    loaded = db.create_table("loaded", SIMPLE, primary_key=["id"])
    written = db.create_table("written", SIMPLE, primary_key=["id"])
    loaded.write(pa.table({"id": [5, 6], "name": ["old", "old"], "score": [0.0, 0.0]}, schema=SIMPLE))
    written.write(pa.table({"id": [5, 6], "name": ["old", "old"], "score": [0.0, 0.0]}, schema=SIMPLE))
    batches = []
    for b in range(8):
        ids_ = [rng.randrange(0, 300) for _ in range(rng.randrange(1, 60))]
        batches.append(
            pa.record_batch(
                {"id": ids_, "name": [f"b{b}-{i}" for i in ids_], "score": [float(b)] * len(ids_)},
                schema=SIMPLE,
            )
        )
    distinct = len({i for batch in batches for i in batch.column(0).to_pylist()})
    total = sum(batch.num_rows for batch in batches)
    # One row per key of each sorted run: between the distinct keys and
    # every row given.
    assert distinct <= loaded.bulk_load(pa.RecordBatchReader.from_batches(SIMPLE, batches)) <= total
    for batch in batches:
        written.write(batch)
    assert loaded.to_arrow().equals(written.to_arrow())


def test_bulk_load_refuses_a_table_with_an_index(simple: basalt.Table) -> None:
    simple.create_index("by_name", ["name"])
    with pytest.raises(basalt.Error):
        simple.bulk_load(pa.table(SIMPLE_DATA, schema=SIMPLE))
    assert simple.to_arrow().num_rows == 0


# ---------------------------------------------------------------- indexes

PEOPLE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("city", pa.utf8()),
        pa.field("age", pa.int32()),
        pa.field("email", pa.utf8()),
    ]
)
PEOPLE_ROWS = [
    {"id": 1, "city": "Oslo", "age": 30, "email": "a@x"},
    {"id": 2, "city": "Bergen", "age": 20, "email": "b@x"},
    {"id": 3, "city": "Oslo", "age": 20, "email": "c@x"},
    {"id": 4, "city": "Oslo", "age": 40, "email": None},
    {"id": 5, "city": "Alta", "age": 55, "email": "e@x"},
    {"id": 6, "city": None, "age": 30, "email": "f@x"},
    {"id": 7, "city": "Oslo", "age": 39, "email": "g@x"},
    {"id": 8, "city": "Bodø", "age": 20, "email": "h@x"},
]


@pytest.fixture
def people(db: basalt.Database) -> basalt.Table:
    table = db.create_table("people", PEOPLE, primary_key=["id"])
    table.write(pa.Table.from_pylist(PEOPLE_ROWS, schema=PEOPLE))
    return table


def _ids_where(pred: Callable[[dict[str, Any]], bool], order: Callable[[dict[str, Any]], Any]) -> list[int]:
    return [r["id"] for r in sorted((r for r in PEOPLE_ROWS if pred(r)), key=order)]


def test_create_index_and_list_indexes(people: basalt.Table) -> None:
    assert people.indexes() == []
    people.create_index("by_city", ["city"])
    people.create_index("by_city_age", ["city", "age"], include=["email"])
    people.create_index("by_email", ["email"], unique=True)
    listed = {i["name"]: i for i in people.indexes()}
    assert set(listed) == {"by_city", "by_city_age", "by_email"}
    assert listed["by_city"] == {"name": "by_city", "columns": ["city"], "include": [], "unique": False}
    assert listed["by_city_age"]["columns"] == ["city", "age"]
    assert listed["by_city_age"]["include"] == ["email"]
    assert listed["by_email"]["unique"] is True


def test_create_index_errors(people: basalt.Table) -> None:
    with pytest.raises(basalt.InvalidArgumentError):
        people.create_index("bad", ["nope"])
    people.create_index("by_city", ["city"])
    with pytest.raises(basalt.InvalidArgumentError):
        people.create_index("by_city", ["age"])
    assert [i["name"] for i in people.indexes()] == ["by_city"]


def test_lookup_eq(people: basalt.Table) -> None:
    people.create_index("by_city", ["city"])
    got = people.lookup("by_city", eq="Oslo")
    assert isinstance(got, pa.Table)
    assert got.schema == PEOPLE
    assert ids(got) == [1, 3, 4, 7]  # index order: city, then primary key
    assert ids(people.lookup("by_city", eq="Nowhere")) == []
    assert people.count("by_city", eq="Oslo") == 4
    assert people.count("by_city", eq="Nowhere") == 0


def test_lookup_eq_none_matches_null(people: basalt.Table) -> None:
    # Table.lookup's docstring: None in a tuple matches null; a bare
    # eq=None means "not given", as Python's keyword defaults do.
    people.create_index("by_city", ["city"])
    assert ids(people.lookup("by_city", eq=(None,))) == [6]
    assert people.count("by_city", eq=(None,)) == 1
    with pytest.raises(basalt.InvalidArgumentError, match="exactly one"):
        people.lookup("by_city", eq=None)


def test_lookup_prefix_eq_and_range_on_two_columns(people: basalt.Table) -> None:
    people.create_index("by_city_age", ["city", "age"])
    order = lambda r: (r["age"], r["id"])  # noqa: E731
    oslo = _ids_where(lambda r: r["city"] == "Oslo", order)
    assert ids(people.lookup("by_city_age", prefix=("Oslo",))) == oslo
    assert ids(people.lookup("by_city_age", prefix="Oslo")) == oslo
    assert people.count("by_city_age", prefix=("Oslo",)) == len(oslo)
    assert ids(people.lookup("by_city_age", eq=("Oslo", 20))) == [3]
    # Range: low included, high excluded (age 40 is out, 20 is in).
    in_range = _ids_where(lambda r: r["city"] == "Oslo" and 20 <= r["age"] < 40, order)
    assert in_range == [3, 1, 7]
    got = people.lookup("by_city_age", range=(("Oslo", 20), ("Oslo", 40)))
    assert ids(got) == in_range
    assert people.count("by_city_age", range=(("Oslo", 20), ("Oslo", 40))) == 3
    assert ids(people.lookup("by_city_age", range=(("Oslo", 21), ("Oslo", 41)))) == [1, 7, 4]


def test_lookup_range_on_one_column(people: basalt.Table) -> None:
    people.create_index("by_age", ["age"])
    order = lambda r: (r["age"], r["id"])  # noqa: E731
    assert ids(people.lookup("by_age", range=(20, 40))) == _ids_where(lambda r: 20 <= r["age"] < 40, order)
    assert ids(people.lookup("by_age", range=(None, 30))) == _ids_where(lambda r: r["age"] < 30, order)
    assert ids(people.lookup("by_age", range=(40, None))) == _ids_where(lambda r: r["age"] >= 40, order)
    assert ids(people.lookup("by_age", range=(30, 30))) == []
    assert people.count("by_age", range=(20, 21)) == 3
    people.create_index("by_city", ["city"])
    # Strings: "B" <= city < "O" (UTF-8 order; "Bodø" is in).
    assert sorted(ids(people.lookup("by_city", range=("B", "O")))) == [2, 8]


def test_lookup_options(people: basalt.Table) -> None:
    people.create_index("by_city", ["city"], include=["email"])
    got = people.lookup("by_city", eq="Oslo", columns=["id", "email"])
    assert got.column_names == ["id", "email"]
    assert got.to_pylist() == [
        {"id": 1, "email": "a@x"},
        {"id": 3, "email": "c@x"},
        {"id": 4, "email": None},
        {"id": 7, "email": "g@x"},
    ]
    assert ids(people.lookup("by_city", eq="Oslo", limit=2)) == [1, 3]
    assert ids(people.lookup("by_city", eq="Oslo", reverse=True)) == [7, 4, 3, 1]
    assert ids(people.lookup("by_city", eq="Oslo", reverse=True, limit=1)) == [7]


def test_lookup_argument_errors(people: basalt.Table) -> None:
    people.create_index("by_city", ["city"])
    with pytest.raises(basalt.InvalidArgumentError):
        people.lookup("by_city")
    with pytest.raises(basalt.InvalidArgumentError):
        people.lookup("by_city", eq="Oslo", prefix="Oslo")
    with pytest.raises(basalt.InvalidArgumentError):
        people.lookup("no_such_index", eq="Oslo")
    with pytest.raises(basalt.InvalidArgumentError):
        people.count("no_such_index", eq="Oslo")
    with pytest.raises(TypeError):
        people.lookup("by_city", eq=12)
    with pytest.raises(TypeError):
        people.lookup("by_city", range="Oslo")
    with pytest.raises(basalt.InvalidArgumentError):
        people.lookup("by_city", eq=("Oslo", 1))  # more values than columns


def test_indexes_follow_writes_and_deletes(people: basalt.Table) -> None:
    people.create_index("by_city", ["city"])
    people.write({"id": [1, 9], "city": ["Alta", "Oslo"], "age": [31, 22]})  # 1 moves, 9 is new
    assert ids(people.lookup("by_city", eq="Oslo")) == [3, 4, 7, 9]
    assert ids(people.lookup("by_city", eq="Alta")) == [1, 5]
    people.delete([3, 5])
    assert ids(people.lookup("by_city", eq="Oslo")) == [4, 7, 9]
    assert ids(people.lookup("by_city", eq="Alta")) == [1]
    assert people.count("by_city", eq="Oslo") == 3
    # Rows read through the index are the current rows.
    assert people.lookup("by_city", eq="Alta").to_pylist() == [{"id": 1, "city": "Alta", "age": 31, "email": None}]


def test_index_created_after_data_is_backfilled_and_used_by_scans(people: basalt.Table) -> None:
    people.create_index("by_age", ["age"])
    got = people.to_arrow(where=[("age", "=", 20)])
    assert ids(got) == [2, 3, 8]
    scan = people.scan(where=[("age", "=", 20)])
    assert ids(scan.read_all()) == [2, 3, 8]


def test_unique_index_violation_writes_nothing(db: basalt.Database) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("email", pa.utf8(), nullable=False)])
    users = db.create_table("users", schema, primary_key=["id"])
    users.write({"id": [1, 2], "email": ["a@x", "b@x"]})
    users.create_index("by_email", ["email"], unique=True)

    # A new row with a taken value, together with an innocent row.
    with pytest.raises(basalt.UniqueViolationError) as info:
        users.write({"id": [3, 4], "email": ["c@x", "a@x"]})
    assert isinstance(info.value, basalt.Error)
    assert info.value.index == "by_email"
    assert "a@x" in info.value.value
    assert ids(users.to_arrow()) == [1, 2]
    assert users.count("by_email", eq="c@x") == 0

    # Two new rows with the same value in one write.
    with pytest.raises(basalt.UniqueViolationError):
        users.write({"id": [5, 6], "email": ["d@x", "d@x"]})
    assert ids(users.to_arrow()) == [1, 2]

    # Through a write batch, with a key-value put beside it.
    with pytest.raises(basalt.UniqueViolationError):
        with db.write_batch() as batch:
            batch.put(b"side", b"effect")
            batch.write(users, {"id": [7], "email": ["b@x"]})
    assert b"side" not in db
    assert ids(users.to_arrow()) == [1, 2]

    # Rewriting a row with its own value is no violation; moving a value frees it.
    users.write({"id": [1], "email": ["a@x"]})
    users.write({"id": [1], "email": ["z@x"]})
    users.write({"id": [3], "email": ["a@x"]})
    assert users.to_arrow().to_pylist() == [
        {"id": 1, "email": "z@x"},
        {"id": 2, "email": "b@x"},
        {"id": 3, "email": "a@x"},
    ]
    assert ids(users.lookup("by_email", eq="a@x")) == [3]


def test_unique_index_over_duplicates_is_refused(people: basalt.Table) -> None:
    with pytest.raises(basalt.UniqueViolationError):
        people.create_index("by_city_u", ["city"], unique=True)
    assert people.indexes() == []
    # The data is unharmed and writes go on.
    people.write({"id": [100], "city": ["Oslo"]})
    assert ids(people.to_arrow(where=[("city", "=", "Oslo")])) == [1, 3, 4, 7, 100]


def test_drop_index(people: basalt.Table) -> None:
    people.create_index("by_city", ["city"])
    people.create_index("by_age", ["age"])
    people.drop_index("by_city")
    assert [i["name"] for i in people.indexes()] == ["by_age"]
    with pytest.raises(basalt.InvalidArgumentError):
        people.lookup("by_city", eq="Oslo")
    with pytest.raises(basalt.InvalidArgumentError):
        people.drop_index("by_city")
    # Scans with a filter on the column still work without the index.
    assert ids(people.to_arrow(where=[("city", "=", "Oslo")])) == [1, 3, 4, 7]
    # And the name can be used again.
    people.create_index("by_city", ["city"])
    assert ids(people.lookup("by_city", eq="Oslo")) == [1, 3, 4, 7]


# -------------------------------------------------------------------- SQL

ORDERS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("customer_id", pa.int64(), nullable=False),
        pa.field("amount", pa.float64()),
        pa.field("status", pa.utf8()),
    ]
)
CUSTOMERS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.utf8(), nullable=False)])
ORDER_ROWS = [
    {"id": i, "customer_id": i % 3 + 1, "amount": float(i * 10), "status": "open" if i % 2 else "paid"}
    for i in range(1, 31)
]
CUSTOMER_ROWS = [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}, {"id": 3, "name": "cy"}, {"id": 4, "name": "dee"}]


@pytest.fixture
def shop(db: basalt.Database) -> basalt.Database:
    db.create_table("orders", ORDERS, primary_key=["id"]).write(pa.Table.from_pylist(ORDER_ROWS, schema=ORDERS))
    db.create_table("customers", CUSTOMERS, primary_key=["id"]).write(
        pa.Table.from_pylist(CUSTOMER_ROWS, schema=CUSTOMERS)
    )
    return db


def test_sql_aggregates(shop: basalt.Database) -> None:
    got = shop.sql("SELECT count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi FROM orders")
    assert isinstance(got, pa.Table)
    amounts = [r["amount"] for r in ORDER_ROWS]
    assert got.to_pylist() == [{"n": 30, "total": sum(amounts), "lo": min(amounts), "hi": max(amounts)}]


def test_sql_group_by(shop: basalt.Database) -> None:
    got = shop.sql(
        "SELECT customer_id, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer_id ORDER BY customer_id"
    )
    expected = []
    for c in (1, 2, 3):
        mine = [r["amount"] for r in ORDER_ROWS if r["customer_id"] == c]
        expected.append({"customer_id": c, "n": len(mine), "total": sum(mine)})
    assert got.to_pylist() == expected


def test_sql_where_on_key_and_other_columns(shop: basalt.Database) -> None:
    got = shop.sql("SELECT id FROM orders WHERE id >= 10 AND id < 15 ORDER BY id")
    assert ids(got) == [10, 11, 12, 13, 14]
    got = shop.sql("SELECT id FROM orders WHERE id = 7")
    assert ids(got) == [7]
    got = shop.sql("SELECT id, amount FROM orders WHERE status = 'open' AND amount > 200 ORDER BY id")
    assert got.to_pylist() == [
        {"id": r["id"], "amount": r["amount"]} for r in ORDER_ROWS if r["status"] == "open" and r["amount"] > 200
    ]
    assert shop.sql("SELECT id FROM orders WHERE status = 'nope'").num_rows == 0


def test_sql_join(shop: basalt.Database) -> None:
    got = shop.sql(
        """
        SELECT c.name AS name, count(o.id) AS n, sum(o.amount) AS total
        FROM customers c JOIN orders o ON o.customer_id = c.id
        WHERE o.status = 'paid'
        GROUP BY c.name
        ORDER BY c.name
        """
    )
    names = {r["id"]: r["name"] for r in CUSTOMER_ROWS}
    totals: dict[str, list[float]] = {}
    for r in ORDER_ROWS:
        if r["status"] == "paid":
            totals.setdefault(names[r["customer_id"]], []).append(r["amount"])
    assert got.to_pylist() == [{"name": n, "n": len(v), "total": sum(v)} for n, v in sorted(totals.items())]
    left = shop.sql(
        "SELECT c.id, count(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
        "GROUP BY c.id ORDER BY c.id"
    )
    assert left.column("n").to_pylist() == [10, 10, 10, 0]


def test_sql_insert_then_read_through_table_api(shop: basalt.Database) -> None:
    shop.sql("INSERT INTO customers VALUES (10, 'eve'), (11, 'fay')")
    customers = shop.table("customers")
    assert customers.get(10) == {"id": 10, "name": "eve"}
    assert customers.get(11) == {"id": 11, "name": "fay"}
    assert ids(customers.to_arrow()) == [1, 2, 3, 4, 10, 11]
    # INSERT is an upsert by primary key.
    shop.sql("INSERT INTO customers (id, name) VALUES (10, 'EVE')")
    assert customers.get(10) == {"id": 10, "name": "EVE"}
    assert shop.sql("SELECT count(*) AS n FROM customers").column("n").to_pylist() == [6]


def test_sql_sees_tables_created_later_and_table_writes(db: basalt.Database) -> None:
    db.sql("SELECT 1")  # the session exists before the table
    table = db.create_table("late", SIMPLE, primary_key=["id"])
    table.write(SIMPLE_DATA)
    assert db.sql("SELECT name FROM late ORDER BY id").column("name").to_pylist() == ["one", "two", "three"]
    table.write({"id": [4], "name": ["four"]})
    assert db.sql("SELECT count(*) AS n FROM late").column("n").to_pylist() == [4]


def test_sql_create_index_and_delete(shop: basalt.Database) -> None:
    shop.sql("CREATE INDEX orders_by_status ON orders (status)")
    orders = shop.table("orders")
    assert [i["name"] for i in orders.indexes()] == ["orders_by_status"]
    assert orders.count("orders_by_status", eq="open") == 15
    shop.sql("DELETE FROM orders WHERE id > 20")
    assert ids(orders.to_arrow()) == list(range(1, 21))
    assert orders.count("orders_by_status", eq="open") == 10


def test_sql_errors_are_invalid_argument(shop: basalt.Database) -> None:
    with pytest.raises(basalt.InvalidArgumentError):
        shop.sql("SELEC oops")
    with pytest.raises(basalt.InvalidArgumentError):
        shop.sql("SELECT * FROM no_such_table")
    with pytest.raises(basalt.InvalidArgumentError):
        shop.sql("SELECT no_such_column FROM orders")


# ------------------------------------------------------ datafusion Python


def test_datafusion_python_reads_a_table(shop: basalt.Database) -> None:
    from datafusion import SessionContext

    orders = shop.table("orders")
    ctx = SessionContext()
    ctx.register_table("t", orders)
    got = ctx.sql("SELECT * FROM t").to_arrow_table()
    expected = orders.to_arrow()
    assert got.column_names == expected.column_names
    assert [f.type for f in got.schema] == [f.type for f in expected.schema]
    assert got.sort_by("id").to_pylist() == expected.to_pylist()

    filtered = ctx.sql("SELECT id, amount FROM t WHERE status = 'open' AND id < 10 ORDER BY id").to_arrow_table()
    assert filtered.to_pylist() == [
        {"id": r["id"], "amount": r["amount"]} for r in ORDER_ROWS if r["status"] == "open" and r["id"] < 10
    ]
    total = ctx.sql("SELECT sum(amount) AS s, count(*) AS n FROM t").to_arrow_table()
    assert total.to_pylist() == [{"s": sum(r["amount"] for r in ORDER_ROWS), "n": 30}]


def test_datafusion_python_join_of_two_basalt_tables(shop: basalt.Database) -> None:
    from datafusion import SessionContext

    ctx = SessionContext()
    ctx.register_table("orders", shop.table("orders"))
    ctx.register_table("customers", shop.table("customers"))
    query = (
        "SELECT c.name AS name, sum(o.amount) AS total FROM orders o JOIN customers c ON o.customer_id = c.id "
        "GROUP BY c.name ORDER BY c.name"
    )
    assert ctx.sql(query).to_arrow_table().to_pylist() == shop.sql(query).to_pylist()


# ------------------------------------------------------------ encodings


@pytest.mark.parametrize("settled", ["zstd", "lz4", "none"])
@pytest.mark.parametrize("dictionaries", [True, False])
def test_settled_compression_and_dictionaries_read_back_exactly(
    tmp_path: pathlib.Path, settled: str, dictionaries: bool
) -> None:
    """Strings of few values (which take dictionaries), distinct strings,
    empty ones, NUL bytes, long values and nulls, bulk-loaded (rows that
    settle) under every settled compression, with dictionaries on and off:
    scans, filtered scans, point reads and a reopen give the rows written;
    zstd and dictionaries take fewer bytes than neither."""
    rng = random.Random(61)
    n = 5000
    cities = ["JFK", "LGA", "EWR", "", "Zürich\x00"]
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("city", pa.string()),
            pa.field("note", pa.string()),
            pa.field("blob", pa.binary()),
            pa.field("x", pa.float64()),
        ]
    )
    table = pa.table(
        [
            pa.array(range(n), pa.int64()),
            pa.array([None if i % 11 == 0 else cities[rng.randrange(5)] for i in range(n)]),
            pa.array([f"note {i} " * (1 + i % 40) if i % 13 else "" for i in range(n)]),
            pa.array([None if i % 5 == 0 else bytes([i % 7]) * (i % 3) for i in range(n)], pa.binary()),
            pa.array([i * 1.5 for i in range(n)]),
        ],
        schema=schema,
    )
    sizes = {}
    for variant in dict.fromkeys([(settled, dictionaries), ("none", False)]):
        path = tmp_path / f"{variant[0]}-{variant[1]}"
        with basalt.open(path, settled_compression=variant[0], string_dictionaries=variant[1]) as db:
            t = db.create_table("t", table.schema, ["id"])
            t.bulk_load(table)
            db.wait_for_background_work()
        with basalt.open(path) as db:
            t = db.table("t")
            assert t.to_arrow().equals(table)
            want = table.filter(pa.compute.equal(table["city"], "EWR"))
            assert t.to_arrow(where=[("city", "==", "EWR")]).equals(want)
            for i in rng.sample(range(n), 200):
                assert t.get(i) == table.slice(i, 1).to_pylist()[0]
            sizes[variant] = sum(f.stat().st_size for f in path.glob("*.sst"))
    if (settled, dictionaries) != ("none", False):
        assert sizes[(settled, dictionaries)] < sizes[("none", False)], sizes
