"""Fails when `maturin build` or scripts/demo.sh would compile a dependency again.

`cargo test --workspace` resolves every dependency's features over all
members and their dev-dependencies; `maturin build` builds basalt-py
alone, and the demo the CLI beside it. A dependency whose features differ
between such a build and the workspace's is a second artifact: a second
build of it and of everything above it (DataFusion took 11 minutes in
CI). basalt-py's Cargo.toml lists the features that make them agree;
this compares them with `cargo tree` (no build) and names any package
that differs. For maturin the basalt crate itself is let through: its
`testing`/`inspect` features are for tests only, and it rebuilds in
seconds; for the demo nothing is.

A package built for the target and for the host (proc macros, build
scripts) appears twice, with each side's features; both must agree.
"""
import re
import subprocess
import sys

ALLOWED = {"basalt"}


def features(*args):
    """Each package's feature sets (one per side it is built for)."""
    out = subprocess.run(
        ["cargo", "tree", "--locked", "--prefix", "none", "-f", "{p} {f}", *args],
        check=True, capture_output=True, text=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        line = line.replace(" (*)", "").strip()
        m = re.match(r"(\S+) (\S+)(?: \([^)]*\))? ?(.*)", line)
        if m:
            found.setdefault((m.group(1), m.group(2)), set()).add(m.group(3))
    return found


# What each script builds, beside what `cargo test --workspace` builds:
# maturin builds basalt-py alone (the basalt crate let through); scripts/
# demo.sh builds the CLI in a selection with basalt-py, whose unification
# list then covers the CLI too, and with the engine's test features, so
# that nothing at all differs: the demo runs the binary the tests built.
SELECTIONS = {
    "maturin build (basalt-py alone)": (["-p", "basalt-py"], ALLOWED),
    "scripts/demo.sh (the CLI)": (["-p", "basalt-cli", "-p", "basalt-py", "--features", "basalt/testing"], set()),
}

workspace = features("--workspace", "-e", "normal,build,dev")
failed = False
for build, (selection, allowed) in SELECTIONS.items():
    alone = features(*selection, "-e", "normal,build")
    drift = [
        f"{name} {version}: workspace builds it with {sorted(workspace[(name, version)])}, "
        f"{build} with {sorted(feats)}"
        for (name, version), feats in sorted(alone.items())
        if name not in allowed and (name, version) in workspace and not feats <= workspace[(name, version)]
    ]
    if drift:
        print(f"{build} resolves these dependencies with other features than the workspace;")
        print("it would compile them (and all above them) again. Add the features to")
        print("crates/basalt-py/Cargo.toml's unification list (the engine's own to the")
        print("selection, here and in the script that builds it):")
        print("\n".join("  " + d for d in drift))
        failed = True
    else:
        print(f"feature drift: none for {build} ({len(alone)} packages)")
sys.exit(1 if failed else 0)
