"""Build script: the package layout lives in pyproject.toml; this file adds what is computed.

- packages: every folder with an ``__init__.py`` under ``src/seqjit`` and ``kernels`` (installed as
  ``seqjit.kernels``).
- Cython extensions: every ``kernels/<family>/cython_cpu.pyx`` becomes ``seqjit.kernels.<family>.cython_cpu``;
  ``src/seqjit/graph/_native_vm.pyx`` (the native replay VM) includes the families' ``_native.pxi``
  kernels and C headers from ``kernels/``; the runtime below both (the team-of-two header) is in
  ``kernels/_runtime/``, found through the same ``kernels`` include folder. Its opcode enum, the
  dispatch from each opcode to its ``run_<opcode>`` (in the family's ``_native.pxi``) and the team
  policy (``_opcodes.pxi``) are generated here from the one list in ``src/seqjit/graph/opcodes.py``,
  and so are the index constants of each opcode's named operands (``_operands.pxi``, not in git).
- OpenMP: used when the compiler accepts ``-fopenmp``; otherwise the extensions build serial
  (``prange`` then runs as a plain loop).
"""
import os
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent


def find_packages():
    packages = []
    for base, prefix in (("src/seqjit", "seqjit"), ("kernels", "seqjit.kernels")):
        for init in sorted((ROOT / base).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / base)
            parts = [] if str(rel) == "." else list(rel.parts)
            packages.append(".".join([prefix, *parts]))
    return packages


def included_sources(*patterns):
    """The C headers and Cython includes an extension may read (``depends``): setuptools rebuilds an
    extension when one of them is newer than its build, so a change to a header alone, which Cython's
    own tracking misses when another header includes it, is never left out of the next build."""
    return sorted({str(path.relative_to(ROOT)) for pattern in patterns for path in ROOT.glob(pattern)})


def write_opcodes():
    """``src/seqjit/graph/_opcodes.pxi`` (the VM's opcode enum and dispatch) and ``_operands.pxi`` (the
    index constant of every opcode's named operands, a build output git ignores), generated from the
    declarations in ``src/seqjit/graph/opcodes.py`` (run as a file: nothing of seqjit is imported);
    each written only when it changed, so unchanged declarations do not rebuild the VM."""
    import runpy

    graph = ROOT / "src" / "seqjit" / "graph"
    opcodes = runpy.run_path(str(graph / "opcodes.py"))
    for name, text in (("_opcodes.pxi", opcodes["pxi_text"]()), ("_operands.pxi", opcodes["operands_pxi_text"]())):
        target = graph / name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")


def find_extensions():
    exts = []
    for pyx in sorted((ROOT / "kernels").glob("*/cython_cpu.pyx")):
        family = pyx.parent.name
        depends = included_sources("kernels/*.h", "kernels/*.pxi", "kernels/_runtime/*.h",
                                   f"kernels/{family}/*.h", f"kernels/{family}/*.pxi")
        exts.append(Extension(f"seqjit.kernels.{family}.cython_cpu", [str(pyx.relative_to(ROOT))],
                              include_dirs=["kernels"], depends=depends))  # kernels/_sj_blas_fallback.h
    import numpy

    depends = included_sources("kernels/**/*.h", "kernels/**/*.pxi", "src/seqjit/graph/*.pxi")
    exts.append(Extension("seqjit.graph._native_vm", ["src/seqjit/graph/_native_vm.pyx"],
                          include_dirs=["kernels", numpy.get_include()], depends=depends))
    return exts


def compiler_accepts(compiler, flags):
    """True when ``compiler`` compiles and links a tiny OpenMP program with ``flags``."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "omp_probe.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        try:
            objs = compiler.compile([src], output_dir=tmp, extra_postargs=flags)
            compiler.link_executable(objs, "omp_probe", output_dir=tmp, extra_postargs=flags)
        except Exception:
            return False
    return True


class BuildExtWithOptionalOpenMP(build_ext):
    def build_extensions(self):
        if os.environ.get("SEQJIT_NO_OPENMP"):
            omp = False
        else:
            omp = sys.platform != "win32" and compiler_accepts(self.compiler, ["-fopenmp"])
        self.announce(f"seqjit: OpenMP {'enabled' if omp else 'not available, building serial'}", level=2)
        from Cython.Build import cythonize  # noqa: F401  (build requirement)

        for ext in self.extensions:
            ext.extra_compile_args = ["-O3", "-ffp-contract=fast"] + (["-fopenmp"] if omp else [])
            ext.extra_link_args = ["-fopenmp"] if omp else []
            ext.define_macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
        super().build_extensions()


def cythonized_extensions():
    from Cython.Build import cythonize

    write_opcodes()

    return cythonize(
        find_extensions(),
        language_level=3,
        include_path=[str(ROOT / "kernels")],
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "nonecheck": False,
        },
        quiet=True,
    )


setup(
    packages=find_packages(),
    ext_modules=cythonized_extensions(),
    cmdclass={"build_ext": BuildExtWithOptionalOpenMP},
)
