"""Draws the architecture of a Rust module folder from its imports.

    python3 scripts/layout.py crates/basalt/src/db [--json] [--edges] [--lock NAME]

Definitions (printed again with the output):

room    An immediate child of the folder: a subfolder with everything under it,
        or a .rs file directly in it (`foo.rs` and `foo/` are one room, the
        module `foo`). The folder's own mod.rs (lib.rs for a crate's src, or a
        `folder.rs` next to the folder) is the facade room, named `mod`/`lib`.
        Lines are non-blank lines (comments included) outside test code.
        Test-only code is left out: tests.rs files, tests/ folders, modules
        declared `#[cfg(test)] mod x;`, and every `#[cfg(test)]` item or
        statement inside a file (found by brace matching).
import  A path from a file of one room to a name defined in a file of another
        room: from `use` declarations (grouped, nested, multi-line, pub use)
        and from paths written inline (`super::super::X`, `crate::db::w::f`,
        `self::x::y`, or through a name brought in by `use`/`mod`). `crate::`
        is the nearest folder above holding lib.rs (else main.rs); `super::`
        and `self::` are the file's module position (mod.rs is its folder's
        module). A path resolves to the deepest module file it names; the
        imported name is the segment after that module (a module `use`d whole
        counts by the names used through it, a glob as `*`). A path landing on the
        facade (a re-export there) is an import of `mod`. Paths leaving the
        folder are ignored. Weight of a room edge = distinct (file, name) pairs.
circle  A strongly connected component of more than one room (or file).
floors  Rooms are ordered by the Eades-Lin-Smyth greedy feedback-arc-set
        heuristic on the weighted room graph (importers first). An edge from a
        room to one placed before it "runs back up"; without those edges,
        floor = 1 + the highest floor among the rooms a room imports (floor 1
        imports nothing in the folder but through imports running back up).
impl    `impl Type {` blocks (inherent impls only, not `impl Trait for Type`),
        counted per type; types implemented in more than one file are listed.
--lock  Files and lines calling `NAME.lock(` (also `self.NAME.lock(`).
"""
import argparse
import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

IDENT = r"[A-Za-z_]\w*"
# Things that hide code from a simple scan: comments, strings, char literals.
LEXEMES = re.compile(r'(?P<raw>\bb?r(?P<hashes>#*)")|//|/\*|"|\'')
CHAR_LITERAL = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]*\}|.)|[^\\'\n])'")
CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
ATTRIBUTE = re.compile(r"\s*#!?\[")
TEST_MOD_DECL = re.compile(rf"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;")
MOD_DECL = re.compile(rf"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;", re.M)
USE_DECL = re.compile(r"\buse\s+([^;]+);")
VISIBILITY_IN = re.compile(r"\bpub\s*\(\s*in\s+[^)]*\)")
INLINE_PATH = re.compile(rf"(?<![\w:])(\$?{IDENT})((?:::{IDENT})+)")
IMPL_START = re.compile(r"^[ \t]*(?:unsafe\s+)?impl\b", re.M)


def blank(chars, start, end):
    """Replaces text with spaces, keeping newlines so offsets and lines hold."""
    for k in range(start, end):
        if chars[k] != "\n":
            chars[k] = " "


def strip_comments_and_strings(src):
    """The source with comments and literal contents blanked (same length)."""
    out, i, n = list(src), 0, len(src)
    while (m := LEXEMES.search(src, i)):
        i, tok = m.start(), m.group(0)
        if m.group("raw"):  # r#"..."#: blank up to the closing quote and hashes
            close = src.find('"' + m.group("hashes"), m.end())
            close = n if close < 0 else close
            blank(out, m.end(), close)
            i = close + 1 + len(m.group("hashes"))
        elif tok == "//":
            end = src.find("\n", i)
            i = n if end < 0 else end
            blank(out, m.start(), i)
        elif tok == "/*":  # block comments nest in Rust
            depth, i = 1, i + 2
            while i < n and depth:
                step = 2 if src.startswith(("/*", "*/"), i) else 1
                depth += {"/*": 1, "*/": -1}.get(src[i:i + 2], 0)
                i += step
            blank(out, m.start(), i)
        elif tok == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            blank(out, m.start() + 1, i)
            i += 1
        else:  # a char literal, or else the quote of a lifetime
            lit = CHAR_LITERAL.match(src, i)
            if lit:
                blank(out, i + 1, lit.end() - 1)
            i = lit.end() if lit else i + 1
    return "".join(out)


def item_end(code, pos):
    """End of the item or statement starting at pos: its `;`, `,`, or the brace
    matching its first `{`; stops before a `}` that closes the enclosing block."""
    depth = 0  # () [] <> nesting, so commas of generics and arguments don't end it
    for k in range(pos, len(code)):
        c = code[k]
        if c in "([" or (c == "<" and code[k - 1] != "<"):
            depth += 1
        elif c in ")]" or (c == ">" and code[k - 1] not in "-=>"):
            depth = max(0, depth - 1)
        elif c == "{":
            level = 0
            for j in range(k, len(code)):
                level += {"{": 1, "}": -1}.get(code[j], 0)
                if level == 0:
                    return j + 1
            return len(code)
        elif c == "}":
            return k
        elif depth == 0 and c in ";,":
            return k + 1
    return len(code)


def closing_bracket(code, pos):
    """Just past the `]` matching the `[` at pos."""
    level = 0
    for k in range(pos, len(code)):
        level += {"[": 1, "]": -1}.get(code[k], 0)
        if level == 0:
            return k + 1
    return len(code)


def strip_test_items(code):
    """Blanks every #[cfg(test)] item; returns (code, spans, test child mods)."""
    out, spans, test_mods = list(code), [], set()
    for m in CFG_TEST.finditer(code):
        start, pos = m.start(), m.end()
        while (a := ATTRIBUTE.match(code, pos)):  # further attributes on the same item
            pos = closing_bracket(code, a.end() - 1)
        decl = TEST_MOD_DECL.match(code, pos)
        if decl:
            test_mods.add(decl.group(1))
        end = item_end(code, pos)
        blank(out, start, end)
        spans.append((start, end))
    return "".join(out), spans, test_mods


def module_path(rel):
    """Module position of a file, from its path below the crate's src root."""
    parts = list(rel.parts)
    if parts[-1] == "mod.rs" or (len(parts) == 1 and parts[0] in ("lib.rs", "main.rs")):
        return tuple(parts[:-1])
    return tuple(parts[:-1] + [parts[-1][:-3]])


def expand_use_tree(text):
    """`a::{b, c::{self, D as E}, *}` -> [(segments, local name or None)]."""
    tokens = re.findall(rf"::|{IDENT}|[{{}},*]", text)
    result = []

    def tree(pos, prefix):
        segs = list(prefix)
        while pos < len(tokens):
            tok = tokens[pos]
            if tok == "{":
                pos += 1
                while tokens[pos] != "}":
                    pos = tree(pos, segs)
                    if tokens[pos] == ",":
                        pos += 1
                return pos + 1
            if tok == "*":
                result.append((segs + ["*"], None))
                return pos + 1
            if tok in (",", "}"):
                break
            if tok == "::":
                segs.append("") if not segs else None  # leading `::`: an extern crate
            elif tok == "as":
                pos += 1
                result.append((segs, tokens[pos]))
                return pos + 1
            elif tok == "self" and segs:
                pass  # `{self}` names the module of the prefix
            else:
                segs.append(tok)
            pos += 1
        result.append((segs, segs[-1] if segs else None))
        return pos

    pos = 0
    while pos < len(tokens):
        pos = tree(pos, []) + 1
    return [(s, a if a != "_" else None) for s, a in result if s]


def find_src_root(folder):
    for d in [folder, *folder.parents]:
        if (d / "lib.rs").exists():
            return d
    for d in [folder, *folder.parents]:
        if (d / "main.rs").exists():
            return d
    sys.exit(f"no lib.rs or main.rs at or above {folder}")


class Layout:
    def __init__(self, folder):
        self.folder = folder.resolve()
        self.root = find_src_root(self.folder)
        self.shown, self.shown_root = os.path.relpath(self.folder), os.path.relpath(self.root)
        self.base = tuple(self.folder.relative_to(self.root).parts)
        self.left_out = dict.fromkeys(["tests.rs files", "files under tests/", "files of #[cfg(test)] mod x;",
                                       "#[cfg(test)] items in files", "non-blank lines of those items",
                                       "main.rs/bin files (crates of their own)"], 0)
        self.files = {}  # relative name -> {mod, room, code, lines}
        self.read_files()
        self.modules = {f["mod"]: name for name, f in self.files.items()}
        self.imports = set()  # (from file, to file, name)
        for name in self.files:
            self.find_imports(name)

    def candidate_files(self):
        paths = sorted(self.folder.rglob("*.rs"))
        facade = self.folder.with_suffix(".rs")
        if self.base and facade.exists():  # `db.rs` next to `db/` is the folder's module
            paths.insert(0, facade)
        for p in paths:
            inner = p.relative_to(self.root).parts[len(self.base):]
            if p.name == "tests.rs":
                self.left_out["tests.rs files"] += 1
            elif "tests" in inner[:-1]:
                self.left_out["files under tests/"] += 1
            elif (self.root / "lib.rs").exists() and p.relative_to(self.root).parts[0] in ("main.rs", "bin"):
                self.left_out["main.rs/bin files (crates of their own)"] += 1  # `crate::` differs there
            else:
                yield p

    def read_files(self):
        test_modules = set()
        for p in self.candidate_files():
            src = p.read_text(encoding="utf-8", errors="replace")
            code, spans, test_mods = strip_test_items(strip_comments_and_strings(src))
            mod = module_path(p.relative_to(self.root))
            test_modules |= {mod + (t,) for t in test_mods}
            kept = list(src)
            for start, end in spans:
                blank(kept, start, end)
            self.left_out["#[cfg(test)] items in files"] += len(spans)
            lines = sum(1 for line in "".join(kept).splitlines() if line.strip())
            all_lines = sum(1 for line in src.splitlines() if line.strip())
            self.left_out["non-blank lines of those items"] += all_lines - lines
            room = mod[len(self.base)] if len(mod) > len(self.base) else self.facade_name(p)
            name = p.name if p == self.folder.with_suffix(".rs") else str(p.relative_to(self.folder))
            self.files[name] = {"mod": mod, "room": room, "code": code, "lines": lines}
        for name in [n for n, f in self.files.items() if any(f["mod"][:len(t)] == t for t in test_modules)]:
            del self.files[name]  # the file of a `#[cfg(test)] mod x;`
            self.left_out["files of #[cfg(test)] mod x;"] += 1

    def facade_name(self, path):
        return path.stem if path.name in ("lib.rs", "main.rs") else "mod"

    @staticmethod
    def absolute(segs, mod, aliases):
        """The path from the crate root that segs name, or None (std, extern crates,
        local names); mod is the module of the file they are written in."""
        first, rest = segs[0], list(segs[1:])
        if first in ("crate", "$crate"):
            at = ()
        elif first in ("super", "self"):
            at = mod[:-1] if first == "super" else mod
        elif first in aliases:
            at = aliases[first]
        else:
            return None
        while rest and rest[0] in ("super", "self"):
            at, rest = (at[:-1] if rest[0] == "super" else at), rest[1:]
        return at + tuple(rest)

    def resolve(self, segs, mod, aliases):
        """(file, name) that segs name in the folder, or None: the deepest module
        file on the path, and the segment after it."""
        full = self.absolute(segs, mod, aliases)
        for k in range(len(full), -1, -1) if full is not None else ():
            target = self.modules.get(full[:k])
            if target is not None:
                return target, full[k] if k < len(full) else (full[-1] if full else "crate")
        return None

    def find_imports(self, name):
        f = self.files[name]
        code = VISIBILITY_IN.sub(lambda m: " " * len(m.group(0)), f["code"])
        # Names a path can start from: child modules declared here, then `use`d names.
        aliases = {m.group(1): f["mod"] + (m.group(1),) for m in MOD_DECL.finditer(code)}
        uses = [p for m in USE_DECL.finditer(code) for p in expand_use_tree(m.group(1))]
        for _ in range(2):  # twice: a `use` may start from a name another `use` brought in
            for segs, alias in uses:
                full = self.absolute(segs, f["mod"], aliases)
                if alias and full is not None and segs[-1] != "*":
                    aliases.setdefault(alias, full)
        # A module `use`d whole only brings its name into scope: the names used
        # through it are counted where the code writes them (`iter::new`).
        found = [self.resolve(segs, f["mod"], aliases) for segs, _ in uses
                 if self.absolute(segs, f["mod"], aliases) not in self.modules]
        # Inline paths: what is left once the `use` declarations are blanked.
        rest_of_code = USE_DECL.sub(lambda m: " " * len(m.group(0)), code)
        for m in INLINE_PATH.finditer(rest_of_code):
            found.append(self.resolve([m.group(1)] + m.group(2).split("::")[1:], f["mod"], aliases))
        self.imports |= {(name, to, what) for to, what in filter(None, found) if to != name}


def strongly_connected(nodes, edges):
    """Tarjan's algorithm; components of more than one node, sorted."""
    succ, index, low, stack, on, out = defaultdict(set), {}, {}, [], set(), []
    for u, v in edges:
        succ[u].add(v)

    def visit(u):
        index[u] = low[u] = len(index)
        stack.append(u)
        on.add(u)
        for v in sorted(succ[u]):
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in on:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            comp = []
            while True:
                v = stack.pop()
                on.discard(v)
                comp.append(v)
                if v == u:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(1000, 10 * len(nodes)))
    for u in sorted(nodes):
        if u not in index:
            visit(u)
    return sorted(out, key=lambda c: (-len(c), c))


def eades_lin_smyth(nodes, weight):
    """Greedy feedback-arc-set order: sinks go to the end, sources to the front,
    else the node with the largest (out - in) weight goes to the front."""
    left, front, back = set(nodes), [], []

    def weight_to(u, outgoing):
        return sum(w for (a, b), w in weight.items()
                   if (a, b)[not outgoing] == u and (a, b)[outgoing] in left and a != b)

    while left:
        while (sinks := [u for u in sorted(left) if weight_to(u, True) == 0]):
            back.insert(0, sinks[0]), left.discard(sinks[0])
        while (sources := [u for u in sorted(left) if weight_to(u, False) == 0]):
            front.append(sources[0]), left.discard(sources[0])
        if left:
            u = max(sorted(left), key=lambda x: weight_to(x, True) - weight_to(x, False))
            front.append(u), left.discard(u)
    return front + back


def floors(order, weight):
    """Floor of each room once the edges against the order are dropped."""
    place, floor = {r: i for i, r in enumerate(order)}, {}
    for r in reversed(order):
        floor[r] = 1 + max((floor[b] for (a, b) in weight if a == r and place[b] > place[r]), default=0)
    return floor


def impl_blocks(files):
    """type -> [(file, line)] of its inherent `impl Type {` blocks."""
    impls = defaultdict(list)
    for name, f in files.items():
        for m in IMPL_START.finditer(f["code"]):
            header = f["code"][m.end():f["code"].find("{", m.end())]
            header = re.sub(r"^\s*<(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*>", "", header)  # impl<T: X<Y>>
            t = re.match(rf"\s*(?:{IDENT}::)*({IDENT})", header)
            if t and not re.search(r"\bfor\b", header):
                impls[t.group(1)].append((name, f["code"].count("\n", 0, m.start()) + 1))
    return impls


def lock_calls(files, lock):
    pattern = re.compile(rf"(?<!\w){re.escape(lock)}\s*\.\s*lock\s*\(")
    return [f"{name}:{f['code'].count(chr(10), 0, m.start()) + 1}"
            for name, f in sorted(files.items()) for m in pattern.finditer(f["code"])]


def analyse(layout, lock):
    files = layout.files
    rooms = sorted({f["room"] for f in files.values()})
    names = defaultdict(set)  # (from room, to room) -> {(file, name)}
    for src, dst, what in layout.imports:
        a, b = files[src]["room"], files[dst]["room"]
        if a != b:
            names[(a, b)].add((src, what))
    weight = {e: len(s) for e, s in names.items()}
    order = eades_lin_smyth(rooms, weight)
    floor = floors(order, weight)
    up = sorted((e for e in weight if order.index(e[0]) > order.index(e[1])), key=lambda e: (-weight[e], e))
    spread = {t: v for t, v in sorted(impl_blocks(files).items()) if len({n for n, _ in v}) > 1}
    room_info = {}
    for r in rooms:
        members = sorted(n for n, f in files.items() if f["room"] == r)
        room_info[r] = {
            "floor": floor[r], "files": members, "lines": sum(files[n]["lines"] for n in members),
            "imports_out": sum(w for (a, _), w in weight.items() if a == r),
            "imports_in": sum(w for (_, b), w in weight.items() if b == r),
            "impl_blocks": {t: sum(1 for n, _ in v if n in members) for t, v in spread.items()},
        }
    return {
        "folder": layout.shown, "crate_root": layout.shown_root,
        "module": "::".join(("crate",) + layout.base), "left_out": layout.left_out,
        "rooms": room_info, "order_top_down": order,
        "floors": {k: sorted(r for r in rooms if floor[r] == k)
                   for k in range(1, max(floor.values(), default=0) + 1)},
        "room_edges": [{"from": a, "to": b, "imports": weight[(a, b)], "up": (a, b) in up,
                        "names": sorted(f"{s}: {w}" for s, w in names[(a, b)])} for a, b in sorted(weight)],
        "up_edges": [{"from": a, "to": b, "imports": weight[(a, b)],
                      "names": sorted({w for _, w in names[(a, b)]})} for a, b in up],
        "room_circles": strongly_connected(rooms, weight),
        "file_circles": strongly_connected(files, {(s, d) for s, d, _ in layout.imports}),
        "file_imports": len(layout.imports),
        "impl_spread": {t: {"blocks": len(v), "files": sorted({n for n, _ in v})} for t, v in spread.items()},
        "lock": {"name": lock, "calls": lock_calls(files, lock)} if lock else None,
    }


def print_text(r, show_edges):
    rooms, out = r["rooms"], print
    out(f"Layout of {r['folder']} ({r['module']}; crate root {r['crate_root']})")
    out(__doc__[__doc__.index("room    "):__doc__.index("--lock  Files")].rstrip())
    left = ", ".join(f"{v} {k}" for k, v in r["left_out"].items() if v)
    out(f"\nLeft out as test-only or another crate: {left or 'nothing'}")
    up_imports = sum(e["imports"] for e in r["up_edges"])
    out(f"\n{len(rooms)} rooms, {sum(len(x['files']) for x in rooms.values())} files, "
        f"{sum(x['lines'] for x in rooms.values())} lines; {r['file_imports']} imports between files, "
        f"{sum(e['imports'] for e in r['room_edges'])} between rooms in {len(r['room_edges'])} room edges")
    out(f"\n{'room':<16}{'floor':>6}{'files':>6}{'lines':>7}{'out':>6}{'in':>6}"
        "  impl blocks of types spread over files  (out/in: imports to/from other rooms)")
    for name in sorted(rooms, key=lambda n: (-rooms[n]["floor"], n)):
        x = rooms[name]
        impls = ", ".join(f"{t} {n}" for t, n in x["impl_blocks"].items() if n)
        out(f"{name:<16}{x['floor']:>6}{len(x['files']):>6}{x['lines']:>7}"
            f"{x['imports_out']:>6}{x['imports_in']:>6}  {impls}")
    out(f"\nFloors, bottom to top ({len(r['floors'])}):")
    for k, members in r["floors"].items():
        out(f"  {k:>2}: {', '.join(members)}")
    out(f"\nImports running back up: {len(r['up_edges'])} room edges carrying {up_imports} imports")
    for e in r["up_edges"]:
        out(f"  {e['from']} -> {e['to']} ({e['imports']}): {', '.join(e['names'])}")
    for level in ("room", "file"):
        circles = r[f"{level}_circles"]
        out(f"\nCircles of {level}s: {len(circles)}")
        for c in circles:
            out(f"  {len(c)} {level}s: {', '.join(c)}")
    out("\nTypes with inherent impl blocks in more than one file:" + ("" if r["impl_spread"] else " none"))
    for t, v in r["impl_spread"].items():
        out(f"  {t}: {v['blocks']} blocks in {len(v['files'])} files: {', '.join(v['files'])}")
    if r["lock"]:
        out(f"\n{r['lock']['name']}.lock() calls: {len(r['lock']['calls'])}")
        for c in r["lock"]["calls"]:
            out(f"  {c}")
    if show_edges:
        out("\nAll room edges (from -> to, imports: file: name):")
        for e in r["room_edges"]:
            out(f"  {e['from']} -> {e['to']} ({e['imports']}){'  UP' if e['up'] else ''}")
            for n in e["names"]:
                out(f"      {n}")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a module folder, e.g. crates/basalt/src/db")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--edges", action="store_true", help="also list every room edge with its imports")
    parser.add_argument("--lock", metavar="NAME", help="list the calls of NAME.lock()")
    args = parser.parse_args()
    if not args.folder.is_dir():
        sys.exit(f"{args.folder} is not a folder")
    result = analyse(Layout(args.folder), args.lock)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        print_text(result, args.edges)


if __name__ == "__main__":
    main()
