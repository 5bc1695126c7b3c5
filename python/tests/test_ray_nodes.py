"""Shards placed on nodes, on a multi-node Ray cluster started on this one
machine (``ray.cluster_utils.Cluster``: a head and two worker nodes, each a
raylet with its own resources): every ingest task of a write and every
read task runs on its shard's node."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

import basalt
from basalt import sharded

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from basalt import ray_data  # noqa: E402

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="module")
def nodes() -> Iterator[list[str]]:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=1, resources={f"worker{i}": 1}) for i in range(2)]
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        cluster.wait_for_nodes()
        ids = [cluster.head_node.node_id, *(w.node_id for w in workers)]
        assert len(set(ids)) == 3
        yield ids
    finally:
        ray.shutdown()
        cluster.shutdown()


def rows(n: int, seed: int, offset: int = 0) -> pa.Table:
    ids = np.random.default_rng(seed).permutation(n) + offset
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(ids * 0.5)})


def test_ingests_and_reads_run_on_each_shards_node(tmp_path: pathlib.Path, nodes: list[str]) -> None:
    store = tmp_path / "store"
    ray.data.from_arrow(rows(9_000, 1)).write_datasink(ray_data.BasaltDatasink(store, "data", ["id"], shards=3))
    # Place shard i on node 2 - i (not the order Ray would pick).
    placement = [nodes[2], nodes[1], nodes[0]]
    basalt.ShardedStore(store).place(placement)
    assert sharded.read_map(store).version == 1
    # A write: each shard's ingest runs on its node.
    sink = ray_data.BasaltDatasink(store, "data")
    ray.data.from_arrow(rows(3_000, 2, offset=100_000)).repartition(3).write_datasink(sink)
    m = sharded.read_map(store)
    assert m.version == 2 and [s.node for s in m.shards] == placement, "the placement stays with the store"
    assert sink.ingest_nodes == placement, "every ingest ran on its shard's node"
    # A read: one task per shard, on its node.
    pin, refs = ray_data.placed_read_refs(store)
    tables = ray.get(refs)
    pin.release()
    ran_on = [t.schema.metadata[b"basalt.node"].decode() for t in tables]
    assert ran_on == placement
    assert sum(t.num_rows for t in tables) == 12_000
    back = pa.concat_tables(ray.get(ray_data.read_basalt(store).to_arrow_refs()))
    assert back.num_rows == 12_000
    assert sorted(back.column("id").to_pylist()) == sorted([*range(9_000), *range(100_000, 103_000)])
