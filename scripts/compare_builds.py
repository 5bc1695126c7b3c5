#!/usr/bin/env python3
"""Before/after of one change: runs two builds of basalt-bench in turn, the
order alternating each round, and prints each figure's median per build
and the ratio (after / before; for a time, lower is better).

    python3 scripts/compare_builds.py BEFORE_BIN AFTER_BIN --rounds 3 \
        -- "omendb --scale 1000000 --engines basalt" "ycsb --scale 100000 --engines basalt"

Each command is run as `BIN <command> --out DIR`; the JSON lines the bench
writes under DIR are read back. Machines here are noisy: read ratios
within a few percent as equal unless the rounds agree.
"""
import argparse
import json
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile


def run(binary: str, command: str, out: pathlib.Path) -> list[dict]:
    before = set(out.glob("*/results.jsonl"))
    subprocess.run([binary, *shlex.split(command), "--out", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    rows = []
    for path in set(out.glob("*/results.jsonl")) - before:
        rows.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return rows


def key(row: dict) -> tuple:
    named = {k: v for k, v in row.items() if k not in ("value", "env", "unit")}
    return tuple(sorted((k, str(v)) for k, v in named.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("commands", nargs="+")
    args = parser.parse_args()
    builds = {"before": args.before, "after": args.after}
    values: dict[tuple, dict[str, list[float]]] = {}
    units: dict[tuple, str] = {}
    with tempfile.TemporaryDirectory(prefix="compare-builds-") as tmp:
        out = pathlib.Path(tmp)
        for round_ in range(args.rounds):
            order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
            for command in args.commands:
                for name in order:
                    print(f"round {round_ + 1}: {name}: {command}", file=sys.stderr, flush=True)
                    for row in run(builds[name], command, out):
                        k = key(row)
                        values.setdefault(k, {"before": [], "after": []})[name].append(float(row["value"]))
                        units[k] = row.get("unit", "")
    print("| figure | unit | before: median (min–max) | after: median (min–max) | after / before |")
    print("| --- | --- | ---: | ---: | ---: |")
    for k, by in sorted(values.items()):
        if not by["before"] or not by["after"]:
            continue
        b, a = statistics.median(by["before"]), statistics.median(by["after"])
        label = ", ".join(v for name, v in k if name in ("workload", "phase", "metric", "query", "threads", "distribution"))
        ratio = a / b if b else float("nan")
        spread = {n: f"{min(v):.4g}–{max(v):.4g}" for n, v in by.items()}
        print(f"| {label} | {units[k]} | {b:.4g} ({spread['before']}) | {a:.4g} ({spread['after']}) | {ratio:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
