"""The import graph of ``src/seqjit`` and ``kernels/``: no circle, and no arrow from a lower layer up.

Every ``import``/``from`` statement of every module (imports inside functions too: they are how circles
hide) is read with :mod:`ast` (``.pyx`` files line by line, ``cimport`` too), without importing anything.
The C level counts as well: a ``.pyx``/``.pxi`` file's ``include "x.pxi"`` and ``cdef extern from "x.h"``
and a header's ``#include "x.h"`` are edges to the project's own file they resolve to (the including
file's folder, then ``kernels/``, then the folder of a ``.pyx`` that compiles it, as Cython and the C
compiler search; system headers are not the project's and do not count). A C file is named by its
folder's package plus its file name (``seqjit.kernels.linear._native.pxi``).
Importing ``seqjit.a.b.c`` also runs the packages ``seqjit.a`` and ``seqjit.a.b``, so those count as
imported too (except a module's own enclosing packages, which Python has already started).

Layers, bottom up (issue #22; docs/development.md)::

    errors/runtime (and kernels/_runtime: the team-of-two header) -> kernels -> graph -> models
      -> decoding -> devices (gpu) -> convert -> the seqjit facade -> text -> applications (g2p, demos) -> integrations (ray) -> CLI

A module may import its own layer or any layer below. The root package ``seqjit/__init__.py`` is a facade
that resolves ``seqjit.load`` and friends lazily by name; it sits above convert, whose functions it
names, and below the applications that call ``seqjit.load``. ``seqjit.text`` (line rules, token
batching, the SentencePiece codec) is the library both the CLI and the Ray integration use.

A module found by name at run time is not an edge here: the kernel registry's backends
(``seqjit.kernels.get``), the facade's lazy names, the device registry's providers
(``seqjit.models.devices.PROVIDERS``: a model asks for the runtime of a device by name; the GPU's
provider implements that protocol, so the model depends on the protocol, not on ``seqjit.gpu``), and
the decoding layer that ``model.generate`` calls (``seqjit.models.base.DECODER``: ``decode`` and
``generate_stream``, the same protocol ``seqjit.decoding`` exports).

There are no exceptions: any circle or upward edge fails.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: (folder, the dotted name of the package it is installed as), see pyproject's package-dir
PACKAGES = ((ROOT / "src" / "seqjit", "seqjit"), (ROOT / "kernels", "seqjit.kernels"))

#: bottom up; a module's layer is the one of the longest prefix below that names it
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors/runtime", ("seqjit.errors", "seqjit.runtime", "seqjit.kernels._runtime")),
    ("kernels", ("seqjit.kernels",)),
    ("graph", ("seqjit.graph",)),
    ("models", ("seqjit.models",)),
    ("decoding", ("seqjit.decoding",)),
    ("devices", ("seqjit.gpu",)),
    ("convert", ("seqjit.convert",)),
    ("facade", ("seqjit",)),
    ("text", ("seqjit.text",)),
    ("applications", ("seqjit.g2p", "seqjit.demos")),
    ("integrations", ("seqjit.integrations",)),
    ("CLI", ("seqjit.commands", "seqjit.cli", "seqjit.__main__")),
)

def _module_files() -> dict[str, Path]:
    """Every module's dotted name -> its source file (``.py``, ``.pyx``; ``.pxi``/``.pxd``/``.h`` by file name)."""
    found: dict[str, Path] = {}
    for folder, package in PACKAGES:
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".py", ".pyx") + C_SUFFIXES or "__pycache__" in path.parts \
                    or "build" in path.parts:
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if path.suffix in C_SUFFIXES:
                parts[-1] = path.name
            elif parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


#: files of the C level, named with their suffix (``seqjit.kernels.linear.native_gemv.h``)
C_SUFFIXES = (".pxi", ".pxd", ".h")
_C_INCLUDE = re.compile(r'^\s*(?:include\s+"([^"]+)"|cdef\s+extern\s+from\s+"([^"]+)"|#\s*include\s+"([^"]+)")')


def _c_includes(path: Path, names: dict[Path, str]) -> set[str]:
    """The project's files that ``path`` includes (Cython ``include``, ``cdef extern from``, C ``#include``),
    resolved as Cython and the C compiler search: the including file's folder, ``kernels/``, then the
    folder of any ``.pyx`` (a ``.pxi`` compiles inside the ``.pyx`` that includes it)."""
    roots = [path.parent, ROOT / "kernels", *sorted({p.parent for p in names if p.suffix == ".pyx"})]
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _C_INCLUDE.match(line)
        if not match:
            continue
        included = next(group for group in match.groups() if group)
        for root in roots:
            candidate = (root / included).resolve()
            if candidate in names:
                found.add(names[candidate])
                break
    return found


_PYX_IMPORT = re.compile(r"^\s*(?:from\s+([.\w]+)\s+c?import\s+(?!\*)([\w ,()]+)|c?import\s+([\w.]+))\s*(?:#.*)?$")


def _statements(path: Path) -> list[tuple[int, str | None, tuple[str, ...]]]:
    """(level, module, names) of every import: ``from ..a import b, c`` is (2, "a", ("b", "c")),
    ``import a.b`` is (0, "a.b", ())."""
    text = path.read_text(encoding="utf-8")
    found = []
    if path.suffix == ".py":
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.Import):
                found += [(0, alias.name, ()) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                found.append((node.level, node.module, tuple(alias.name for alias in node.names)))
        return found
    for line in text.splitlines():  # Cython: ``import`` and ``cimport`` alike
        match = _PYX_IMPORT.match(line)
        if match and match.group(1):
            module = match.group(1)
            level = len(module) - len(module.lstrip("."))
            names = tuple(name.strip(" ()") for name in match.group(2).split(","))
            found.append((level, module.lstrip(".") or None, tuple(n for n in names if n)))
        elif match and match.group(3):
            found.append((0, match.group(3), ()))
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the seqjit modules it imports (directly, or as enclosing packages that run first)."""
    files = _module_files()
    by_path = {path.resolve(): name for name, path in files.items()}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        if path.suffix != ".py":
            included = _c_includes(path, by_path)
            if path.suffix == ".h":
                graph[name] = included
                continue
        else:
            included = set()
        is_package = path.stem == "__init__"
        here = name if is_package else name[:-len(path.name) - 1] if path.suffix in C_SUFFIXES \
            else name.rpartition(".")[0]
        targets: set[str] = set()
        for level, module, names in _statements(path):
            if level:
                base = here
                for _ in range(level - 1):
                    base = base.rpartition(".")[0]
                module = f"{base}.{module}" if module else base
            if module is None or not (module == "seqjit" or module.startswith("seqjit.")):
                continue
            named = [f"{module}.{alias}" for alias in names if f"{module}.{alias}" in files]
            targets.update(named or [module])
            if len(named) < len(names):  # some names are attributes of ``module`` itself
                targets.add(module)
        enclosing = {name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)} | {name}
        for target in list(targets):
            parts = target.split(".")
            for k in range(2, len(parts)):  # the enclosing packages run first (not the root facade)
                targets.add(".".join(parts[:k]))
        graph[name] = {t for t in targets if t in files and t not in enclosing} | included
    return graph


def layer(module: str) -> int:
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in {Path(__file__).name}")
    return best


def _cycle_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every edge that lies on some circle (both ends in one strongly connected component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    component: dict[str, int] = {}
    counter = [0]

    def visit(root: str) -> None:  # Tarjan, iterative (the graph is deep enough to worry recursion)
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component[member] = index[node]
                        if member == node:
                            break

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return {(a, b) for a, targets in graph.items() for b in targets if component[a] == component[b]}


def violations(graph: dict[str, set[str]]) -> dict[tuple[str, str], str]:
    """(importer, imported) -> what rule the edge breaks."""
    found = {edge: "on a circle" for edge in _cycle_edges(graph)}
    for source, targets in graph.items():
        for target in targets:
            if layer(target) > layer(source):
                found[(source, target)] = (f"up from {LAYERS[layer(source)][0]} to {LAYERS[layer(target)][0]}"
                                           + (" and on a circle" if (source, target) in found else ""))
    return found


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_every_module_has_a_layer(graph):
    for module in graph:
        layer(module)


def test_no_circle_or_upward_import(graph):
    new = violations(graph)
    assert not new, "imports that break the layering (fix the layering, not the import):\n" + "\n".join(
        f"  {a} -> {b}: {why}" for (a, b), why in sorted(new.items()))


def test_the_walker_sees_function_level_imports_includes_and_circles():
    """The walker itself: a function-level import is an edge, so are Cython includes and C headers, and a
    circle is found (guards the guard)."""
    files = import_graph()
    assert "seqjit.errors" in files and "seqjit.kernels.softmax.numba_cpu" in files
    assert "seqjit.kernels._runtime.native_team.h" in files["seqjit.kernels.linear._native.pxi"]
    assert "seqjit.kernels.linear._native.pxi" in files["seqjit.graph._native_vm"]
    assert "seqjit.kernels._sj_isa_variants.h" in files["seqjit.kernels.linear.native_gemv.h"]
    assert layer("seqjit.kernels._runtime.native_team.h") < layer("seqjit.kernels.linear._native.pxi")
    circle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle_edges(circle) == {("a", "b"), ("b", "c"), ("c", "a")}


def test_a_model_reaches_the_decoding_layer_by_name_only():
    """Importing the models imports no decoding (nor device) code; ``model.generate`` finds the decoding
    layer by its name, :data:`seqjit.models.base.DECODER`, which exports what the models call."""
    import subprocess
    import sys

    code = ("import sys, seqjit.models.base as base\n"
            "assert not [m for m in sys.modules if m.startswith(('seqjit.decoding', 'seqjit.gpu'))]\n"
            "decoder = base._decoder()\n"
            "assert decoder.__name__ == base.DECODER and callable(decoder.decode) and callable(decoder.generate_stream)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
