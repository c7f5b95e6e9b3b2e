"""Model configurations: dataclasses that round-trip through ``config.json`` with checked values.

Each architecture defines a subclass of :class:`ModelConfig` (a dataclass). Fields may carry
``metadata={"choices": (...)}``; :meth:`ModelConfig.from_dict` refuses unknown keys, missing
required keys, values of the wrong kind and values outside ``choices``, naming the key.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import ClassVar

from seqjit.errors import ConfigError

FORMAT_VERSION = 1


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
            raise ConfigError(f"{where}: architecture is {arch!r}, expected {cls.arch!r}")
        version = data.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ConfigError(f"{where}: format_version {version!r} is not supported (this seqjit reads {FORMAT_VERSION})")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown} for architecture {cls.arch!r}")
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
                raise ConfigError(f"{where}: {name!r} must be {annotation}, got {value!r}")
            choices = f.metadata.get("choices")
            if choices is not None and value not in choices:
                raise ConfigError(f"{where}: {name!r} must be one of {list(choices)}, got {value!r}")
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
            raise ConfigError(f"{where}: {name!r} must be a positive integer, got {value!r}")
