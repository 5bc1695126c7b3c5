"""Sharded stores without Ray: the engine's shard map (``SHARDS``) routes
keys by their encoded bytes, the engine's own order, for every key type;
damage is ``CorruptionError``."""

from __future__ import annotations

import datetime
import math
import pathlib

import pyarrow as pa
import pytest

import basalt
from basalt import sharded


def test_composite_keys_and_prefix_bounds_route_by_the_engines_order(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.utf8(), nullable=False),
                        pa.field("v", pa.int64())])
    points = [(-5,), (0, "m"), (7,)]
    rows = [(a, b) for a in (-9, -5, -1, 0, 6, 7, 2**62) for b in ("", "a", "l", "m", "zz", "\u00e9")]
    with sharded.create(tmp_path / "s", schema, ["a", "b"], points) as store:
        store.put({"a": [r[0] for r in rows], "b": [r[1] for r in rows], "v": list(range(len(rows)))})
        for i, (a, b) in enumerate(rows):
            assert store.get((a, b)) == {"a": a, "b": b, "v": i}
        # Each shard holds exactly the keys of its range.
        def shard(a: int, b: str) -> int:
            if a < -5:
                return 0
            if a < 0 or (a == 0 and b < "m"):
                return 1
            return 2 if a < 7 else 3
        for i in range(4):
            got = store.table(i).scan(columns=["a", "b"]).read_all().to_pylist()
            assert [(r["a"], r["b"]) for r in got] == sorted(r for r in rows if shard(*r) == i)
        assert store.scan().read_all().num_rows == len(rows)
    m = sharded.read_map(tmp_path / "s")
    assert m.split_points == points and m.primary_key == ["a", "b"] and m.version == 1


def test_float_keys_route_as_the_engine_orders_them(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([pa.field("k", pa.float64(), nullable=False), pa.field("v", pa.int64())])
    keys = [-math.inf, -1e300, -1.5, -0.0, 1e-300, 2.5, math.inf, math.nan]
    with sharded.create(tmp_path / "s", schema, ["k"], [-1.0, 2.5]) as store:
        store.put({"k": keys, "v": list(range(len(keys)))})
        for i, k in enumerate(keys):
            got = store.get(k)
            assert got is not None and got["v"] == i, k
        # NaN sorts last in the engine's order: the last shard holds it.
        last = store.table(2).scan(columns=["v"]).read_all().column("v").to_pylist()
        assert sorted(last) == [5, 6, 7]
        assert store.map.shard_of(math.nan) == 2 and store.map.shard_of(-0.0) == 1


def test_bad_split_points_and_keys_are_refused(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False)])
    with pytest.raises(basalt.InvalidArgumentError):
        sharded.create(tmp_path / "a", schema, ["k"], [5, 5])
    with pytest.raises(TypeError):
        sharded.create(tmp_path / "b", schema, ["k"], ["5"])
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists(), "nothing made"
    with sharded.create(tmp_path / "c", schema, ["k"], [10]) as store:
        with pytest.raises(TypeError):
            store.map.shard_of("x")
        with pytest.raises(basalt.InvalidArgumentError):
            store.map.shard_of((1, 2))


def test_a_damaged_or_legacy_map_is_an_error_not_an_empty_store(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([pa.field("k", pa.utf8(), nullable=False)])
    sharded.create(tmp_path / "s", schema, ["k"], ["m"]).close()
    file = tmp_path / "s" / sharded.SHARD_MAP
    good = file.read_bytes()
    for i in range(0, len(good), 3):
        bad = bytearray(good)
        bad[i] ^= 0x10
        file.write_bytes(bytes(bad))
        with pytest.raises(basalt.CorruptionError, match="SHARDS"):
            sharded.read_map(tmp_path / "s")
    file.unlink()
    (tmp_path / "s" / "shards.json").write_text("{}")
    with pytest.raises(basalt.InvalidArgumentError, match="shards.json"):
        sharded.read_map(tmp_path / "s")


def test_date_and_timestamp_keys_route_and_maps_with_nan_bounds_compare_equal(tmp_path: pathlib.Path) -> None:
    day = datetime.date(2024, 1, 1)
    schema = pa.schema([pa.field("d", pa.date32(), nullable=False), pa.field("v", pa.int64())])
    days = [day + datetime.timedelta(days=i) for i in range(-3, 4)]
    with sharded.create(tmp_path / "dates", schema, ["d"], [day]) as store:
        store.put({"d": days, "v": list(range(7))})
        assert [store.get(d)["v"] for d in days] == list(range(7))  # type: ignore[index]
        assert store.table(0).scan().read_all().num_rows == 3
    stamp = datetime.datetime(2024, 1, 1, 12, 0)
    schema = pa.schema([pa.field("t", pa.timestamp("us"), nullable=False), pa.field("v", pa.int64())])
    with sharded.create(tmp_path / "stamps", schema, ["t"], [stamp]) as store:
        store.put({"t": [stamp - datetime.timedelta(microseconds=1), stamp], "v": [0, 1]})
        assert store.map.shard_of(stamp) == 1 and store.get(stamp) == {"t": stamp, "v": 1}
    schema = pa.schema([pa.field("k", pa.float64(), nullable=False)])
    sharded.create(tmp_path / "nan", schema, ["k"], [1.0, math.nan]).close()
    m = sharded.read_map(tmp_path / "nan")
    assert m == sharded.read_map(tmp_path / "nan"), "a NaN bound equals itself"
    assert m != m.with_paths(2, [s.path for s in m.shards])
