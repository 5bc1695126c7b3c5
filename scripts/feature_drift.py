"""Fails when `maturin build` would compile a dependency again.

`cargo test --workspace` resolves every dependency's features over all
members and their dev-dependencies; `maturin build` builds basalt-py
alone. A dependency whose features differ between the two is a second
artifact: a second build of it and of everything above it (DataFusion took
11 minutes in CI). basalt-py's Cargo.toml lists the features that make the
two agree; this compares them with `cargo tree` (no build) and names any
package that differs. The basalt crate itself is let through: its
`testing`/`inspect` features are for tests only, and it rebuilds in seconds.

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


python = features("-p", "basalt-py", "-e", "normal,build")
workspace = features("--workspace", "-e", "normal,build,dev")
drift = [
    f"{name} {version}: workspace builds it with {sorted(workspace[(name, version)])}, "
    f"maturin alone with {sorted(feats)}"
    for (name, version), feats in sorted(python.items())
    if name not in ALLOWED and (name, version) in workspace and not feats <= workspace[(name, version)]
]
if drift:
    print("basalt-py alone resolves these dependencies with other features than the workspace;")
    print("maturin build would compile them (and all above them) again. Add the features to")
    print("crates/basalt-py/Cargo.toml's unification list:")
    print("\n".join("  " + d for d in drift))
    sys.exit(1)
print(f"feature drift: none ({len(python)} packages under basalt-py)")
