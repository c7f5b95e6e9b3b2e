"""Model configurations: dataclasses that round-trip through ``config.json`` with checked values.

Each architecture defines a subclass of :class:`ModelConfig` (a dataclass). Fields may carry
``metadata={"choices": (...)}`` or ``metadata={"max": n}``; :meth:`ModelConfig.from_dict` refuses
unknown keys, missing required keys, values of the wrong kind, values outside ``choices``, and values
outside the limits below, naming the key. The limits are checked before anything is built or
allocated from the config (sizes the weights fix are then checked against the weights' header):

- every integer within ``|n| <= MAX_INT`` (2**31 - 1);
- a field's ``max`` metadata, else :data:`LIMITS` by field name: layer counts at most 1024,
  ``max_positions`` at most 65536 (a sinusoidal table is computed from it, not read), and
  ``layer_norm_eps`` at most 1;
- every float finite (no NaN, Infinity or numbers too large for a float).
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import ClassVar

from seqjit.errors import ConfigError

FORMAT_VERSION = 1
MAX_INT = (1 << 31) - 1
MAX_LAYERS = 1024
MAX_POSITIONS = 1 << 16
#: field name -> largest value allowed, for fields no weight fixes (or fixes only through many tensors)
LIMITS = {"num_layers": MAX_LAYERS, "encoder_layers": MAX_LAYERS, "decoder_layers": MAX_LAYERS,
          "max_positions": MAX_POSITIONS, "layer_norm_eps": 1.0}


def _show(value, width: int = 60) -> str:
    """``repr(value)`` cut to ``width`` characters (a config value may be huge or deeply nested)."""
    try:
        text = repr(value)
    except RecursionError:
        return f"a deeply nested {type(value).__name__}"
    return text if len(text) <= width else text[:width] + "..."


def _range_problem(value, kind: str, limit) -> str | None:
    """What is wrong with a ``value`` already of the right ``kind`` ("int", "float", ...), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if kind == "float":
        try:
            finite = math.isfinite(float(value))
        except OverflowError:  # an integer too large for a float
            finite = False
        if not finite:
            return f"must be a finite number, got {_show(value)}"
    elif abs(value) > MAX_INT:
        return f"is {_show(value)}, outside the range seqjit supports (|n| <= 2**31 - 1)"
    if limit is not None and value > limit:
        return f"is {_show(value)}; seqjit allows at most {limit}"
    return None


def choice(default, choices: tuple):
    """A dataclass field whose value must be one of ``choices``."""
    return dataclasses.field(default=default, metadata={"choices": tuple(choices)})


def _kind_ok(value, annotation: str) -> bool:
    base = annotation.replace(" ", "")
    optional = base.endswith("|None") or base.startswith("None|")
    base = base.replace("|None", "").replace("None|", "")
    if value is None:
        return optional
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base == "bool":
        return isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    return True


@dataclasses.dataclass
class ModelConfig:
    """Base of every architecture's config; ``arch`` is the architecture's registry name."""

    arch: ClassVar[str] = ""

    def to_dict(self) -> dict:
        return {"architecture": self.arch, "format_version": FORMAT_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict, *, where: str = "config"):
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(data).__name__}")
        data = dict(data)
        arch = data.pop("architecture", cls.arch)
        if arch != cls.arch:
            raise ConfigError(f"{where}: architecture is {_show(arch)}, expected {cls.arch!r}")
        version = data.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ConfigError(f"{where}: format_version {_show(version)} is not supported (this seqjit reads {FORMAT_VERSION})")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {_show(unknown, 200)} for architecture {cls.arch!r}")
        hints = typing.get_type_hints(cls)
        for name, f in fields.items():
            if name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise ConfigError(f"{where}: missing required key {name!r}")
                continue
            value = data[name]
            annotation = f.type if isinstance(f.type, str) else str(hints.get(name, ""))
            annotation = annotation.replace("typing.", "").replace("<class '", "").replace("'>", "")
            if not _kind_ok(value, annotation):
                raise ConfigError(f"{where}: {name!r} must be {annotation}, got {_show(value)}")
            choices = f.metadata.get("choices")
            if choices is not None and value not in choices:
                raise ConfigError(f"{where}: {name!r} must be one of {list(choices)}, got {_show(value)}")
            kind = annotation.replace(" ", "").replace("|None", "").replace("None|", "")
            problem = _range_problem(value, kind, f.metadata.get("max", LIMITS.get(name)))
            if problem:
                raise ConfigError(f"{where}: {name!r} {problem}")
        config = cls(**data)
        config.validate(where)
        return config

    def validate(self, where: str = "config") -> None:
        """Architecture-specific consistency checks (sizes positive, heads divide dims...)."""

    def replace(self, **changes):
        return self.from_dict({**self.to_dict(), **changes})


def positive(where: str, **values) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{where}: {name!r} must be a positive integer, got {_show(value)}")


def check_suppression(config, where: str, vocab: int) -> None:
    """The suppression rules a config may carry (``suppress_tokens``, ``begin_suppress_tokens``: lists of
    token ids; ``bad_words_ids``: a list of non-empty lists), every id in ``[0, vocab)``."""
    def ids(name, value):
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in value):
            raise ConfigError(f"{where}: {name} must be a list of token ids in [0, {vocab}), got {_show(value)}")

    for name in ("suppress_tokens", "begin_suppress_tokens", "end_token"):
        value = getattr(config, name, None)
        if value is not None:
            ids(name, value)
    words = getattr(config, "bad_words_ids", None)
    if words is not None:
        if not isinstance(words, (list, tuple)):
            raise ConfigError(f"{where}: bad_words_ids must be a list of token-id lists, got {_show(words)}")
        for k, word in enumerate(words):
            ids(f"bad_words_ids[{k}]", word)
            if not word:
                raise ConfigError(f"{where}: bad_words_ids[{k}] is empty")
