"""Where Numba keeps the machine code of seqjit's ``cache=True`` kernels: the user's cache directory.

Numba's default puts the cache files next to the source, in ``__pycache__`` inside site-packages:
that fails on a read-only install (Numba then falls back to a per-user directory only after trying)
and leaves stale files behind when the package is reinstalled. :func:`configure` points Numba at
``$XDG_CACHE_HOME/seqjit/numba`` (``~/.cache/seqjit/numba`` when XDG_CACHE_HOME is unset or not an
absolute path) by setting ``NUMBA_CACHE_DIR``, before any jitted function is defined (it runs when
``seqjit.kernels`` is first imported, and every kernel module is inside it). A ``NUMBA_CACHE_DIR``
the user set, even empty, is left alone: it is also how to choose another directory. Numba files
each cache under a subdirectory named after the source file's path and checks the source's
timestamp, so two installs never read each other's entries.

The variable is process-wide: other ``cache=True`` functions defined after seqjit is imported cache
there too, and child processes inherit it (so a benchmark's fresh processes share one cache).
"""
from __future__ import annotations

import os
import sys

#: the variable Numba reads (numba.core.config.CACHE_DIR)
ENV = "NUMBA_CACHE_DIR"


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/seqjit/numba``, or ``~/.cache/seqjit/numba``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "seqjit", "numba")


def configure() -> str:
    """Set ``NUMBA_CACHE_DIR`` to :func:`default_cache_dir` unless the user set it; returns the value
    in force ("" when the user set it empty: Numba's own default). If Numba was imported already,
    its configuration is reloaded so that functions defined from now on use it."""
    if ENV in os.environ:
        return os.environ[ENV]
    os.environ[ENV] = default_cache_dir()
    config = sys.modules.get("numba.core.config")
    if config is not None:
        config.reload_config()
    return os.environ[ENV]
