"""Numba's cache of seqjit's kernels lives in the user's cache directory, not in the package
(kernels/_numba_cache.py). Each case runs in a fresh process: the directory must be chosen before
Numba (or any jitted function) is first set up, which an already-running test process is past."""
import os
import subprocess
import sys
import time
from pathlib import Path

import seqjit.kernels

PACKAGE = Path(seqjit.kernels.__file__).resolve().parent


def _run(code, tmp_path, **env_changes):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update({"XDG_CACHE_HOME": str(tmp_path / "xdg"), **env_changes})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _new_cache_files(root, since):
    return [p for p in Path(root).rglob("*.nb[ic]") if p.stat().st_mtime >= since]


def test_kernel_cache_files_go_to_the_user_cache_directory_not_the_package(tmp_path):
    started = time.time() - 1
    code = ("import numpy as np; from seqjit import kernels; import numba\n"
            "kernels.get('embedding', backend='numba')(np.array([1, 2]), np.ones((5, 3), np.float32))\n"
            "print(numba.config.CACHE_DIR)")
    want = tmp_path / "xdg" / "seqjit" / "numba"
    assert _run(code, tmp_path) == str(want)
    assert [p for p in want.rglob("*.nbi") if "embedding" in str(p)], "no cache index in the user cache directory"
    assert _new_cache_files(PACKAGE, started) == []  # a read-only install is never written to


def test_a_users_own_numba_cache_dir_wins(tmp_path):
    code = "import seqjit.kernels, numba; print(numba.config.CACHE_DIR)"
    assert _run(code, tmp_path, NUMBA_CACHE_DIR=str(tmp_path / "mine")) == str(tmp_path / "mine")
    assert _run(code, tmp_path, NUMBA_CACHE_DIR="") == ""  # set empty: Numba's own default, kept


def test_numba_imported_first_still_gets_the_user_cache_directory(tmp_path):
    code = "import numba; import seqjit.kernels; print(numba.config.CACHE_DIR)"
    assert _run(code, tmp_path) == str(tmp_path / "xdg" / "seqjit" / "numba")


def test_relative_xdg_cache_home_is_ignored(tmp_path):
    code = "import seqjit.kernels, numba; print(numba.config.CACHE_DIR)"
    home = tmp_path / "home"
    assert _run(code, tmp_path, XDG_CACHE_HOME="rel/cache", HOME=str(home)) == str(home / ".cache" / "seqjit" / "numba")


def test_a_read_only_package_directory_still_compiles_and_caches(tmp_path):
    """The package directory mounted read-only (a private mount namespace: needs root or user
    namespaces, as in CI containers); the kernel still compiles and its cache lands in the user's."""
    import shutil

    import pytest

    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot mount the package read-only here (unshare -m not permitted)")
    code = ("import numpy as np; from seqjit import kernels\n"
            "print(kernels.get('embedding', backend='numba')(np.array([1]), np.ones((3, 2), np.float32)).tolist())")
    script = (f"mount --bind -o ro {PACKAGE} {PACKAGE} && touch {PACKAGE}/.probe 2>/dev/null && exit 3; "
              f"exec {sys.executable} -c \"$CODE\"")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), CODE=code)
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[[1.0, 1.0]]"
    assert list((tmp_path / "xdg" / "seqjit" / "numba").rglob("*.nbi"))
