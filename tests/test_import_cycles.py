"""No import circle anywhere in the tree: ``src/``, ``kernels/`` and ``benchmarks/``.

Every ``import``/``from`` statement (inside functions too: that is where circles hide) is read with
:mod:`ast`, nothing is imported. A dotted name resolves to the most specific module of the tree it
names (``from a.b import c`` is ``a.b.c`` when that is a module, else ``a.b``); a bare name in a
benchmark script resolves as the script's ``sys.path.insert(0, HERE)`` makes it: a sibling file
first, else the one file of that name under ``benchmarks/``. ``tests/test_import_layers.py`` checks
the layers of ``src/seqjit`` on top of this (and its C includes). As there, a module's own
enclosing packages are not edges: Python has started them before the module runs.
"""
from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: (folder, the dotted name of the package it is imported as)
TREES = ((ROOT / "src" / "seqjit", "seqjit"), (ROOT / "kernels", "seqjit.kernels"), (ROOT / "benchmarks", "benchmarks"))


def module_files() -> dict[str, Path]:
    """Dotted name -> file, for every ``.py`` of the trees (packages by their ``__init__.py``)."""
    out = {}
    for top, name in TREES:
        for folder, dirs, files in os.walk(top):  # symlinks not followed: src/seqjit/kernels is kernels/
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            rel = Path(folder).relative_to(top).parts
            for f in files:
                if f.endswith(".py"):
                    parts = (name, *rel) + (() if f == "__init__.py" else (f[:-3],))
                    out[".".join(parts)] = Path(folder) / f
    return out


def imported_names(path: Path, module: str) -> list[str]:
    """The dotted names one file imports (``from x import y`` gives ``x.y`` and ``x``)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names += [f"{base}.{a.name}" if base else a.name for a in node.names]
    return names


def resolve(name: str, module: str, path: Path, files: dict[str, Path], by_basename: dict[str, list[str]]):
    """The tree's module a dotted name means, or None when it is not the tree's."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in files:
            return ".".join(parts[:n])
    if module.startswith("benchmarks"):
        sibling = path.parent / f"{parts[0]}.py"
        for candidate, p in files.items():
            if p == sibling:
                return candidate
        if len(by_basename.get(parts[0], [])) == 1:
            return by_basename[parts[0]][0]
    return None


def graph() -> dict[str, set[str]]:
    files = module_files()
    by_basename: dict[str, list[str]] = {}
    for m in files:
        if m.startswith("benchmarks."):
            by_basename.setdefault(m.rpartition(".")[2], []).append(m)
    edges = {}
    for module, path in files.items():
        targets = {resolve(n, module, path, files, by_basename) for n in imported_names(path, module)}
        edges[module] = {t for t in targets if t and t != module and not module.startswith(t + ".")}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_checker_finds_a_circle_and_a_bare_sibling_import(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    import b\n")
    b.write_text("from benchmarks.x import a\n")
    files = {"benchmarks.x.a": a, "benchmarks.x.b": b}
    basenames = {"a": ["benchmarks.x.a"], "b": ["benchmarks.x.b"]}
    edges = {m: {resolve(n, m, p, files, basenames) for n in imported_names(p, m)} - {None} for m, p in files.items()}
    assert edges == {"benchmarks.x.a": {"benchmarks.x.b"}, "benchmarks.x.b": {"benchmarks.x.a"}}
    assert circles(edges) == [["benchmarks.x.a", "benchmarks.x.b"]]


def test_no_import_circle_in_the_tree():
    edges = graph()
    assert any(m.startswith("benchmarks.") for m in edges) and "seqjit.decoding" in edges
    found = circles(edges)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)
