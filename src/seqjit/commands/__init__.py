"""The CLI subcommands (see :mod:`seqjit.cli`): one module per command, each with ``register(sub)``."""
