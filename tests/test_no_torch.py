"""The installed package holds no training code and never imports torch (issue #22).

torch is an optional extra of the tests, the benchmarks and the toolkits, never of seqjit: a PyTorch
checkpoint is read as safetensors (a pickle is refused, with the command that converts it, which the
user runs: :func:`seqjit.models.io.pickle_conversion_command`), and the peers seqjit is measured against
(the G2P models as PyTorch modules, torch's attention) live in ``benchmarks/``. Checked two ways: every
``import`` of every module read from the sources (inside functions and in code strings too), and every
module imported in a fresh interpreter, after which ``torch`` is not in ``sys.modules``.
"""
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "src" / "seqjit", ROOT / "kernels")
#: a string the package holds but never runs: the command it prints for the user (seqjit.models.io)
PRINTED = {("src/seqjit/models/io.py", "pickle_conversion_command")}
_TORCH = re.compile(r"^\s*(?:c?import\s+torch\b|from\s+torch\b)|\bimport\s+torch\b")


def _sources():
    for folder in FOLDERS:
        for path in sorted(folder.rglob("*")):
            if path.suffix in (".py", ".pyx", ".pxi") and "build" not in path.parts:
                yield path


def torch_imports(text: str, rel: str) -> list:
    """Where the source ``text`` of file ``rel`` (relative to the checkout) imports torch: statements,
    ``import_module``/``__import__`` of it, code strings."""
    if not rel.endswith(".py"):
        return [f"{rel}:{n}" for n, line in enumerate(text.splitlines(), 1) if _TORCH.match(line)]
    found = []
    tree = ast.parse(text)
    printed = {node for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) and (rel, fn.name) in PRINTED
               for node in ast.walk(fn)}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            names = [str(node.args[0].value)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node not in printed \
                and _TORCH.search(node.value):
            names = ["torch"]  # in a code string
        found += [f"{rel}:{node.lineno} {name}" for name in names if name.split(".")[0] == "torch"]
    return found


def test_no_module_imports_torch():
    found = [hit for path in _sources() for hit in torch_imports(path.read_text(encoding="utf-8"),
                                                                    path.relative_to(ROOT).as_posix())]
    assert not found, "torch imported in the package (move it to benchmarks/ or tools/):\n" + "\n".join(found)


def test_the_check_sees_a_lazy_import():
    """Guards the guard: an import inside a function, one by name, and one in a code string are all found;
    the printed conversion command only where it is printed."""
    sample = ("def f():\n    import torch.nn\n\ndef g():\n    importlib.import_module('torch')\n\n"
              "CODE = 'import json; import torch; print(1)'\n")
    assert len(torch_imports(sample, "src/seqjit/sample.py")) == 3
    assert len(torch_imports("def pickle_conversion_command():\n    return 'import torch'\n", "src/seqjit/models/io.py")) == 0
    assert len(torch_imports("def other():\n    return 'import torch'\n", "src/seqjit/models/io.py")) == 1
    assert len(torch_imports("from torch cimport x\n", "kernels/x/_native.pxi")) == 1


def test_no_training_code_in_the_package():
    names = {p.stem for folder in FOLDERS for p in folder.rglob("*.py")}
    assert not names & {"train", "training", "torch_models"}, names & {"train", "training", "torch_models"}


def test_importing_every_module_imports_no_torch():
    """Every module of the package imported in a fresh interpreter (the GPU's and Ray's only when their
    extra is installed, as a user would have them): torch is not among the modules loaded."""
    code = """
import importlib, pkgutil, sys
import seqjit
skipped = ("seqjit.integrations.ray", "seqjit.gpu.", "seqjit.kernels._cuda", "seqjit.graph.device")
for info in pkgutil.walk_packages(seqjit.__path__, "seqjit."):
    if info.name.endswith(".cuda") or info.name.startswith(skipped) or info.name.endswith("__main__"):
        continue
    importlib.import_module(info.name)
assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))[:5]
print("imported", len([m for m in sys.modules if m.startswith("seqjit")]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
