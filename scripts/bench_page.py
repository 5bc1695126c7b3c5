#!/usr/bin/env python3
"""Turns the results of one benchmark run into the tables that open
docs/BENCHMARKS.md, so the page is refreshed by a command, not edited.

    python3 scripts/bench_page.py bench-results/page > /tmp/page.md
    python3 scripts/bench_page.py bench-results/page --write docs/BENCHMARKS.md

Reads every `results.jsonl` under the directory (each `basalt-bench`
invocation writes one, medians of its runs) and prints, per workload
family, one table: a row per measurement, a column per engine, and
Basalt's ratio to the best peer and to each named peer (above 1: Basalt is
better, whether the metric is a rate or a latency). Goals the open issues
set are checked where they name a metric and a peer. With `--write FILE`
the generated part of FILE (between its two markers) is replaced and the
rest of the file kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

BEGIN = "<!-- bench_page.py: generated from here; edit the script, not this -->"
END = "<!-- bench_page.py: generated up to here -->"

# Workload family of each workload name (a prefix before `-` or `@`).
FAMILIES = [
    ("Key-value", ["quick", "omendb", "ycsb", "marbledb"]),
    ("Tables and indexes", ["arrow", "resilientdb"]),
    ("SQL", ["tpch", "sql", "analyst"]),
    ("Transactions", ["transactions"]),
]

# The peers, in the order their columns appear.
PEER_ORDER = ["lmdb", "sqlite", "duckdb", "redb", "fjall", "rocksdb", "leveldb", "parquet", "datafusion"]

# Families measured by scripts of their own, not by this run: (family,
# script, where the history has their latest figures).
HISTORY = "BENCHMARKS-history.md"
SEPARATE = [
    ("Loads", "scripts/bench-load.sh", '"Loading files (issue 17)" and the sections of issue 41'),
    ("Python", "scripts/bench-python.sh", '"From Python (issue 18)"'),
    ("Ray", "python/bench/ray_bench.py", '"Ray Data (issue 21)"'),
]

# Goals the issues set: (what, workload prefix, Basalt's metric and key
# order, the peer's engine — "best": the best peer measured — metric and
# key order — no peer: Basalt's value itself is the ratio — the ratio
# Basalt must reach, issue).
GOALS = [
    ("read-modify-write transactions vs the best peer", "transactions", "txn_per_s", "rmw-low", "best",
     "txn_per_s", None, 1.2, 43),
    ("transfer transactions vs the best peer", "transactions", "txn_per_s", "transfer-low", "best",
     "txn_per_s", None, 1.2, 43),
    ("YCSB C reads vs LMDB", "ycsb-c", "ops_per_s", None, "lmdb", "ops_per_s", None, 1.2, 40),
    ("YCSB E short scans vs LMDB", "ycsb-e", "ops_per_s", None, "lmdb", "ops_per_s", None, 1.0, 40),
    (
        "bulk_load vs LMDB's row inserts",
        "arrow",
        "bulk_load_rows_per_s",
        "columnar",
        "lmdb",
        "insert_rows_per_s",
        "row",
        2.0,
        41,
    ),
    ("throughput kept under a 32 MiB budget", "marbledb", "throughput_kept_ratio", None, None, None, None, 0.9, 41),
    # A time with no peer: Basalt's own figure must stay at or under it.
    ("ADD COLUMN on the loaded table, ms", "arrow", "add_column_ms", "columnar", None, None, None, 1000.0, 43),
    # Issue 65: at most 1.5x DuckDB's time over six everyday queries (as
    # a geometric mean), and ORDER BY key DESC LIMIT 5 at most its time.
    ("an analyst's six queries vs DuckDB (geomean)", "analyst", "query_ms", "geomean-6", "duckdb", "query_ms",
     None, 1 / 1.5, 65),
    ("ORDER BY key DESC LIMIT 5 vs DuckDB", "analyst", "query_ms", "key-desc-limit-5", "duckdb", "query_ms",
     None, 1.0, 65),
    (
        "prepared point query vs SQLite",
        "tpch",
        "point_query_us",
        None,
        "sqlite",
        "point_query_us",
        None,
        0.5,
        38,
    ),
]

# Basalt's SQL small queries are measured three ways (tpch): a prepared
# statement (`…_prepared_us`), new text through `basalt_datafusion::query`
# (`…_text_us`) and new text through DataFusion's own plan (`…_us`). The
# peers' `…_us` are their prepared statements: Basalt's prepared figure
# goes in their row, and its DataFusion-plan figure gets a row of its own.
SQL_WAYS = [("_query_prepared_us", "_query_us"), ("_query_us", "_query_planned_us")]


# What a family's table needs said under it.
NOTES = {
    "SQL": (
        "Small queries (`tpch`, µs per query): every engine's `…_query_us` is a prepared statement run with "
        "its parameters; Basalt's `…_text_us` is new text each time through `basalt_datafusion::query` "
        "(the plan cache and direct path), `…_planned_us` new text through DataFusion's own planner. "
        "`query_ms` is each TPC-H query's median, `parquet` DataFusion over Parquet files. `analyst`: "
        "issue 65's generated 3M-row flights log, 2 threads each (DuckDB in a child process), warm; `geomean-6` is the "
        "geometric mean of six everyday queries' medians (the report.md of the run has each query)."
    ),
    "Key-value": (
        "`basalt-fences` is Basalt without its learned index (binary search of the fence keys); "
        "`marbledb-backpressure` is the insert run under a 32 MiB write budget."
    ),
    "Transactions": (
        "`transactions`: each engine's own transactions, run again after a conflict (`aborts_per_commit`: "
        "Basalt's and fjall's optimistic commits refused; SQLite, LMDB and redb serialize writers). `rmw` "
        "reads and rewrites one account, `transfer` two; `low` draws from every account, `high` from 16."
    ),
    "Tables and indexes": (
        "`arrow`: `columnar` rows are Basalt's Arrow paths (`Table::write`, `bulk_load`, scans), `row` "
        "every engine's row-at-a-time path. `resilientdb`: `basalt-scan` answers the same queries by "
        "filtered scans, without its indexes."
    ),
}


def shown(record: dict) -> bool:
    """Whether the page shows a record. It is to be read in a screen or
    two: rates, bytes, stalls and whole-run times; not the latency
    percentiles beside each rate, the per-query TPC-H times, the latency
    breakdowns or the engine's own memory accounting (the run's
    `report.md` files and the history have those)."""
    metric = record["metric"]
    if higher_is_better(metric) is None or "speedup" in metric:
        return False
    if "breakdown" in metric or "engine_memory" in metric or metric.endswith(("_p50_us", "_p99_us")):
        return False
    if metric in ("settle_ms", "write_peak_memory_bytes"):
        return False
    return not (metric == "query_ms" and record.get("query") not in SHOWN_QUERIES)


# The per-query times the page shows (the runs' report.md files have every
# query): TPC-H's total, and the analyst family's geometric mean of its six
# everyday queries and its ORDER BY key DESC LIMIT 5 (issue 65's goals).
SHOWN_QUERIES = (None, "all", "geomean-6", "key-desc-limit-5")


def renamed(record: dict) -> dict:
    """`record` with Basalt's SQL small-query metrics named as above."""
    if record["engine"] != "basalt" or not record["workload"].startswith("tpch"):
        return record
    metric = record["metric"]
    if metric.endswith("_text_us"):
        return record
    for suffix, to in SQL_WAYS:
        if metric.endswith(suffix):
            return {**record, "metric": metric[: -len(suffix)] + to}
    return record


def higher_is_better(metric: str) -> bool | None:
    """As the bench crate's `result::higher_is_better`."""
    if metric.endswith("_per_s") or metric == "throughput_kept_ratio":
        return True
    if metric.endswith(("_ns", "_us", "_ms", "_bytes", "_per_commit")):
        return False
    return None


def family_of(workload: str) -> str | None:
    base = workload.split("@")[0].split("-")[0]
    for name, prefixes in FAMILIES:
        if base in prefixes:
            return name
    return None


def load(run_dir: Path) -> list[dict]:
    records = []
    for path in sorted(run_dir.rglob("results.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def fmt(value: float, unit: str) -> str:
    if unit in ("rows/s", "ops/s", "queries/s") or unit.endswith("/s"):
        if value >= 1e6:
            return f"{value / 1e6:.2f}M"
        if value >= 1e3:
            return f"{value / 1e3:.1f}K"
        return f"{value:.0f}"
    if unit == "bytes":
        return f"{value / 2**20:.1f} MiB"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ratio(basalt: float, peer: float, higher: bool) -> float | None:
    if basalt <= 0 or peer <= 0:
        return None
    return basalt / peer if higher else peer / basalt


def page(records: list[dict], run_dir: Path) -> str:
    measured = [renamed(r) for r in records if shown(r)]
    if not measured:
        raise SystemExit(f"bench_page.py: no results.jsonl with measurements under {run_dir}")
    envs = [r["env"] for r in measured]
    dates = sorted(e.get("date", "") for e in envs)
    commits = sorted({e.get("git_commit", "?") for e in envs})
    builds = sorted({e.get("build", "?") for e in envs})
    machine = envs[0]
    out = [BEGIN, ""]
    out.append(
        f"Run of {dates[0][:16].replace('T', ' ')} to {dates[-1][:16].replace('T', ' ')} UTC on "
        f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
        f"{machine.get('memory_bytes', 0) / 2**30:.0f} GiB; commit {', '.join(commits)}; "
        f"{', '.join(builds)} build; medians of {max(e.get('runs', 1) for e in envs)} runs, "
        "engines in rotated order. Made by `bash scripts/bench-page.sh` (its commands, one per workload; "
        f"each wrote a `report.md` with every metric into `{run_dir}`), tables by "
        "`python3 scripts/bench_page.py`. "
        "A ratio above 1 means Basalt is better (faster, or smaller), whatever the metric."
    )
    out.append("")
    if any(b != "release" for b in builds):
        out.append("**Not a release build: these figures are not to be quoted.**")
        out.append("")
    by_family: dict[str, list[dict]] = defaultdict(list)
    for r in measured:
        fam = family_of(r["workload"])
        if fam is not None:
            by_family[fam].append(r)
    for fam, _ in FAMILIES:
        rows = by_family.get(fam)
        out.append(f"### {fam}")
        out.append("")
        if not rows:
            out.append("Not in this run.")
            out.append("")
            continue
        engines = sorted({r["engine"] for r in rows})
        peers = [e for e in PEER_ORDER if e in engines] + sorted(
            e for e in engines if e not in PEER_ORDER and not e.startswith("basalt")
        )
        ours = ["basalt"] + sorted(e for e in engines if e.startswith("basalt") and e != "basalt")
        ours = [e for e in ours if e in engines]
        cells: dict[tuple, dict[str, dict]] = defaultdict(dict)
        for r in rows:
            key = (r["workload"], r["scale"], r["distribution"], r["threads"], r["metric"], r.get("query") or "")
            cells[key][r["engine"]] = r
        header = ["workload", "scale", "keys", "threads", "metric", *ours, *peers, "Basalt ÷ best peer"]
        out.append("| " + " | ".join(header) + " |")
        out.append("| " + " | ".join(["---"] * 5 + ["---:"] * (len(ours) + len(peers) + 1)) + " |")
        for key in sorted(cells):
            workload, scale, dist, threads, metric, query = key
            row = cells[key]
            higher = bool(higher_is_better(metric))
            unit = next(iter(row.values()))["unit"]
            values = [fmt(row[e]["value"], unit) if e in row else "" for e in ours + peers]
            best = None
            basalt = row.get("basalt")
            # An abort rate is reported, not raced: most engines never abort.
            if basalt is not None and not metric.endswith("_per_commit"):
                ratios = [ratio(basalt["value"], row[p]["value"], higher) for p in peers if p in row]
                ratios = [x for x in ratios if x is not None]
                best = min(ratios) if ratios else None
            name = metric + (f" ({query})" if query else "")
            out.append(
                "| "
                + " | ".join(
                    [workload, f"{scale:,}", dist, str(threads), name, *values, f"{best:.2f}×" if best else ""]
                )
                + " |"
            )
        if fam in NOTES:
            out.append("")
            out.append(NOTES[fam])
            out.append("")
    goals_out = goal_rows(measured)
    for fam, script, section in SEPARATE:
        out.append(f"### {fam}")
        out.append("")
        out.append(
            f"Not part of the generated run: `{script}` writes its own tables; the latest figures are in "
            f"[the history]({HISTORY}), {section}."
        )
        out.append("")
    if goals_out:
        out.append("### Goals the issues set")
        out.append("")
        out.append("| goal | target | measured | | issue |")
        out.append("| --- | ---: | ---: | --- | ---: |")
        out.extend(goals_out)
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def goal_rows(records: list[dict]) -> list[str]:
    """A table row per measurement each goal of GOALS names, or one
    saying it was not measured."""
    rows = []
    for what, wl, metric, dist, peer, peer_metric, peer_dist, target, issue in GOALS:
        found = False
        for r in records:
            if r["engine"] != "basalt" or not r["workload"].startswith(wl) or r["metric"] != metric:
                continue
            # A goal's `dist` names a distribution or, for query
            # workloads, a query.
            if dist is not None and dist not in (r["distribution"], r.get("query")):
                continue
            if peer is None:
                got = r["value"]
            else:
                other = [
                    p
                    for p in records
                    if (p["engine"] == peer or (peer == "best" and p["engine"] in PEER_ORDER))
                    and p["workload"] == r["workload"]
                    and p["scale"] == r["scale"]
                    and p["threads"] == r["threads"]
                    and p["metric"] == peer_metric
                    and p["distribution"] == (peer_dist or r["distribution"])
                    and p.get("query") == r.get("query")
                ]
                if not other:
                    continue
                better = bool(higher_is_better(metric))
                best = (max if better else min)(other, key=lambda p: p["value"])
                got = ratio(r["value"], best["value"], better)
                if got is None:
                    continue
            found = True
            where = f"{r['workload']}, {r['scale']:,}, {r['distribution']}, {r['threads']} thread" + (
                "s" if r["threads"] != 1 else ""
            )
            at_most = peer is None and higher_is_better(metric) is False
            verdict = "met" if (got <= target if at_most else got >= target) else "not met"
            bound = f"≤ {target:.4g}" if at_most else f"≥ {target:.4g}"
            rows.append(f"| {what} ({where}) | {bound} | {got:.2f} | {verdict} | {issue} |")
        if not found:
            bound = f"≤ {target:.4g}" if peer is None and higher_is_better(metric) is False else f"≥ {target:.4g}"
            rows.append(f"| {what} | {bound} | not measured in this run | | {issue} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="the directory one scripts/bench-page.sh run wrote")
    parser.add_argument("--write", type=Path, help="replace the generated part of this file")
    args = parser.parse_args()
    text = page(load(args.run_dir), args.run_dir)
    if args.write is None:
        sys.stdout.write(text)
        return
    doc = args.write.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"bench_page.py: {args.write} lacks the markers {BEGIN!r} and {END!r}")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    args.write.write_text(head + text.rstrip("\n") + tail)


if __name__ == "__main__":
    main()
