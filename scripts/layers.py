#!/usr/bin/env python3
"""Draw the core crate's module import graph and check it against the layers.

Why: issue 38 asks that src/ read as a stack (format < codecs < files < directory <
replication), each layer importing only downward, by path, never through lib.rs's
re-exports. This script measures that from the code itself, so the figure can be
checked on every change instead of traced by hand.

What it reads: every `crate::...`, `super::...` and `self::...` path in src/ (outside
src/bin, comments and string literals; `use` trees with braces expanded), resolved to
the longest module prefix that names a file; a path into a child module
(`ship::ShipSource` in logdir/mod.rs) counts as well. A path `crate::Name` whose first segment
is not a module is an item re-exported by lib.rs: it counts as an arrow up (through the
roof), and is traced to the module lib.rs takes it from. Code under `#[cfg(test)]`
(unit tests, inline or in a file declared `#[cfg(test)] mod tests;`) is listed apart: a test may build its input with a higher layer.

Rooms are the top-level modules (a folder or a root file). Layers, bottom up (a room
may import its own layer and those below):

    0  leaves: names, position, log_id, read_at, open, observe
    1  format
    2  codec, decoder
    3  reader, inspect, writer, error (the top error, which wraps the layers' errors)
    4  logdir
    5  replica

Output: the rooms and their arrows, import circles between rooms (strongly connected
components), arrows up (each with the imports behind it), and a summary line. With
--check, exits 1 unless: no circle, at most 5 arrows up, none through lib.rs, and
replication names none of the directory's internals (see INTERNALS).

Usage: python3 scripts/layers.py [--src src] [--check] [--dot FILE]
       python3 scripts/layers.py --src raft/src --circles-only --check   (other crates: circles only)
"""

import argparse
import os
import re
import sys
from collections import defaultdict

LAYERS = {
    "names": 0,
    "position": 0,
    "log_id": 0,
    "read_at": 0,
    "open": 0,
    "observe": 0,
    "format": 1,
    "codec": 2,
    "decoder": 2,
    "reader": 3,
    "inspect": 3,
    "writer": 3,
    "error": 3,
    "logdir": 4,
    "replica": 5,
    "lib": 6,
}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"

# Replication (replica/) reaches the directory through `logdir::ship::ShipSource`
# alone. Rust's privacy cannot say so (a child module sees its parent's private
# items), so this is checked here: the directory's state and its lock-holding
# accessors are never named in the replica room.
INTERNALS = re.compile(r"\b(?:Inner|Catalog|Active)\b|\.inner\b|\.catalog\(\)")


def strip_comments_and_strings(text):
    """Blank out comments, string and char literals, keeping offsets and newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not re.match(r"[A-Za-z0-9_]", text[i - 1])):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}'), not a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def inline_mods(text):
    """(start, end, name, is_test) of every inline `mod name { ... }`."""
    mods = []
    for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", text):
        start = m.end() - 1
        end = matching_brace(text, start)
        before = text[max(0, m.start() - 200):m.start()]
        is_test = bool(re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?$", before))
        mods.append((start, end, m.group(1), is_test))
    return mods


def test_ranges(text):
    """Ranges of items under #[cfg(test)] (inline test modules and single items)."""
    ranges = []
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        brace = text.find("{", m.end())
        semi = text.find(";", m.end())
        if semi >= 0 and (brace < 0 or semi < brace):
            ranges.append((m.start(), semi))
        elif brace >= 0:
            ranges.append((m.start(), matching_brace(text, brace)))
    return ranges


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (aliases and globs dropped)."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)::\{(.*)\}$", tree)
    if not m:
        if tree.startswith("{") and tree.endswith("}"):
            return [p for part in split_top(tree[1:-1]) for p in expand_use_tree(part)]
        return [re.sub(r"as" + IDENT + "$", "", tree.split(" as ")[0]).rstrip(":*").rstrip(":")]
    prefix, inner = m.group(1), m.group(2)
    paths = []
    for part in split_top(inner):
        if not part:
            continue
        if part == "self":
            paths.append(prefix)
        else:
            paths.extend(prefix + "::" + p for p in expand_use_tree(part))
    return paths


def split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p]


def module_of(path, src):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return tuple(rel)


def room_of(module):
    if not module:
        return "lib"
    return module[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", "src"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--dot", help="write the room graph in Graphviz dot to this file")
    ap.add_argument("--quiet", action="store_true", help="only the summary")
    ap.add_argument(
        "--circles-only",
        action="store_true",
        help="every room on one layer: check only for import circles (raft/src)",
    )
    args = ap.parse_args()
    layers = defaultdict(int) if args.circles_only else LAYERS
    src = os.path.normpath(args.src)

    files = {}
    for root, dirs, names in os.walk(src):
        if os.path.relpath(root, src).split(os.sep)[0] == "bin":
            continue
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                files[module_of(path, src)] = path
    modules = set(files)
    lines = {m: sum(1 for _ in open(p)) for m, p in files.items()}

    # lib.rs's re-exports: `crate::Name` -> the module it comes from.
    lib_text = strip_comments_and_strings(open(files[()]).read())
    reexports = {}
    for m in re.finditer(r"pub\s+use\s+([^;]+);", lib_text):
        for p in expand_use_tree(m.group(1)):
            segs = p.split("::")
            alias = re.search(r"\bas\s+(" + IDENT + ")", m.group(1))
            reexports[segs[-1]] = tuple(segs[:-1])
            if alias and len(expand_use_tree(m.group(1))) == 1:
                reexports[alias.group(1)] = tuple(segs[:-1])

    # Files that are unit tests as a whole: declared `#[cfg(test)] mod name;`.
    test_files = set()
    for module, path in files.items():
        text = strip_comments_and_strings(open(path).read())
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+(" + IDENT + r")\s*;", text):
            test_files.add(module + (m.group(1),))
    changed = True
    while changed:  # and everything below them
        changed = False
        for module in modules:
            if module not in test_files and any(module[: len(t)] == t for t in test_files):
                test_files.add(module)
                changed = True

    edges = defaultdict(set)  # (from_room, to_room) -> {(file, line, path, test)}
    for module, path in sorted(files.items()):
        if module == ():
            continue  # lib.rs declares and re-exports: it is the roof
        raw = open(path).read()
        text = strip_comments_and_strings(raw)
        mods = inline_mods(text)
        tests = test_ranges(text)
        found = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            for p in expand_use_tree(m.group(1)):
                found.append((m.start(), p))
        # Paths used in expressions and types (not in `use`).
        use_spans = [(m.start(), m.end()) for m in re.finditer(r"\buse\s+[^;]+;", text)]
        children = "|".join(sorted(m[-1] for m in modules if m[:-1] == module and m))
        pattern = r"(?<![A-Za-z0-9_:.])((?:crate|super" + ("|" + children if children else "") + r")(?:::" + IDENT + r")+)"
        for m in re.finditer(pattern, text):
            if not any(a <= m.start() < b for a, b in use_spans):
                found.append((m.start(), m.group(1)))
        for pos, p in found:
            segs = [s for s in p.split("::") if s]
            scope = list(module) + [name for a, b, name, _ in mods if a < pos < b]
            if segs and tuple(scope + segs[:1]) in modules and segs[0] not in ("crate", "super", "self"):
                segs = ["self"] + segs  # a path into a child module: `replica::Replica`
            if not segs or segs[0] not in ("crate", "super", "self"):
                continue
            is_test = module in test_files or any(a <= pos <= b for a, b in tests)
            if segs[0] == "crate":
                base, rest = [], segs[1:]
            else:
                base = scope
                rest = segs
                while rest and rest[0] in ("super", "self"):
                    if rest[0] == "super":
                        base = base[:-1]
                    rest = rest[1:]
            full = base + rest
            via_lib = False
            if segs[0] == "crate" and rest and tuple(rest[:1]) not in {k[:1] for k in modules if k}:
                if rest[0] in reexports:
                    full = list(reexports[rest[0]]) + rest
                    via_lib = True
                else:
                    continue  # a macro or an item defined in lib.rs itself
            target = ()
            for k in range(len(full), 0, -1):
                if tuple(full[:k]) in modules:
                    target = tuple(full[:k])
                    break
            a, b = room_of(module), room_of(target)
            if a == b and not via_lib:
                continue
            line = raw.count("\n", 0, pos) + 1
            edges[(a, b if not via_lib else "lib")].add(
                (os.path.relpath(path, os.path.dirname(src)), line, p, is_test, room_of(target))
            )

    rooms = sorted({room_of(m) for m in modules} - {"lib"}, key=lambda r: (layers.get(r, 9), r))
    unknown = [r for r in rooms if r not in layers]
    if unknown and not args.circles_only:
        print("rooms without a layer (add them to LAYERS):", ", ".join(unknown))
        return 2

    def real(uses):
        return [u for u in uses if not u[3]]

    arrows = {e: u for e, u in edges.items() if real(u)}
    test_only = {e: u for e, u in edges.items() if not real(u)}
    up = {e: u for e, u in arrows.items() if e[1] == "lib" or layers[e[1]] > layers[e[0]]}
    through_lib = {e for e in up if e[1] == "lib"}

    # Circles: strongly connected components of the room graph (arrows through lib.rs
    # traced to the room the re-export comes from).
    graph = defaultdict(set)
    for (a, b), uses in arrows.items():
        for u in real(uses):
            if u[4] != a:
                graph[a].add(u[4])
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp, key=lambda r: (layers[r], r)))

    for r in rooms:
        if r not in index:
            strong(r)

    if not args.quiet:
        print("rooms (layer, lines):")
        for r in rooms:
            n = sum(v for m, v in lines.items() if room_of(m) == r)
            outs = sorted({b for (a, b) in arrows if a == r})
            print(f"  {layers[r]} {r:9} {n:6}  -> {', '.join(outs) or '-'}")
        print()
        print("import circles:", "none" if not sccs else "")
        for c in sccs:
            print("  " + " <-> ".join(c))
        print()
        print("arrows up:", "none" if not up else "")
        for (a, b), uses in sorted(up.items()):
            what = "through lib.rs" if b == "lib" else f"to layer {layers[b]}"
            print(f"  {a} (layer {layers[a]}) -> {b} ({what}):")
            for f, line, p, _, t in sorted(real(uses)):
                print(f"      {f}:{line}  {p}" + (f"  [from {t}]" if b == "lib" else ""))
        ups_in_tests = {e: u for e, u in test_only.items() if e[1] == "lib" or layers[e[1]] > layers[e[0]]}
        if ups_in_tests:
            print()
            print("in unit tests only (not counted):")
            for (a, b), uses in sorted(ups_in_tests.items()):
                print(f"  {a} -> {b}: " + ", ".join(sorted({f'{f}:{line}' for f, line, *_ in uses})))
        print()

    print(
        f"rooms {len(rooms)}, arrows {len(arrows)}, arrows up {len(up)} "
        f"({len(through_lib)} through lib.rs), import circles {len(sccs)}"
        + (f" ({', '.join('/'.join(c) for c in sccs)})" if sccs else "")
    )

    if args.dot:
        with open(args.dot, "w") as out:
            out.write("digraph layers {\n  rankdir=BT;\n")
            for r in rooms:
                out.write(f'  "{r}" [label="{r}\\nlayer {layers[r]}"];\n')
            for (a, b) in sorted(arrows):
                colour = "darkgoldenrod" if (a, b) in up else "black"
                out.write(f'  "{a}" -> "{b}" [color={colour}];\n')
            out.write("}\n")

    reaching = []
    for module, path in sorted(files.items()):
        if room_of(module) != "replica" or module in test_files:
            continue
        text = strip_comments_and_strings(open(path).read())
        for m in INTERNALS.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            reaching.append(f"{os.path.relpath(path)}:{line} {m.group(0)}")
    if reaching:
        print("replication reaching the directory's internals (use logdir::ship):")
        for r in reaching:
            print(f"  {r}")
    elif not args.quiet:
        print("replication reaches the directory through logdir::ship only")

    if args.check:
        if args.circles_only:
            return 0 if not sccs else 1
        ok = not sccs and len(up) <= 5 and not through_lib and not reaching
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
