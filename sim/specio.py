"""Typed, path-aware reading of YAML mappings into frozen dataclasses.

Every check raises ``SpecError(file, key_path, expected)``; nothing here does I/O except
``load_yaml``, which reads with a ``yaml.SafeLoader`` only (no Python object tags).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml

from sim.errors import SpecError


class _SafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` (no Python object tags) whose bad scalars are YAML errors with a line.

    The safe constructors raise plain Python errors for values such as ``2001-13-45``,
    ``!!int abc``, ``!!bool maybe`` or an integer of more than 4300 digits; here they become a
    ``ConstructorError`` that carries the node's position like every other YAML error.
    """

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to build a safe scalar is bad input
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {node.tag.rsplit(':', 1)[-1]} value: {exc}", node.start_mark) from None


def load_yaml(path: Path, what: str = "file") -> Any:
    """Read one YAML file safely; every failure is a SpecError naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(str(path), "", f"{what} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), "", f"cannot read {what}: {exc}") from None
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is None and isinstance(exc, yaml.reader.ReaderError):  # a character YAML refuses
            line = text.count("\n", 0, exc.position) + 1
            column = exc.position - text.rfind("\n", 0, exc.position)
            at = f" at line {line}, column {column}"
            problem = f"character {exc.character!r} is not allowed"
        else:
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(str(path), "", f"invalid YAML{at}: {problem}") from None
    except RecursionError:
        raise SpecError(str(path), "", "invalid YAML: nested too deeply") from None


def is_file(path: Path) -> bool:
    """``path.is_file()``, False also for a name the OS cannot look up (too long, a NUL byte)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class Node:
    """A value inside a YAML document together with where it came from."""

    value: Any
    file: str | None
    path: str

    def error(self, message: str) -> SpecError:
        return SpecError(self.file, self.path, message)

    def child(self, key: str | int) -> "Node":
        sub = f"{self.path}[{key}]" if isinstance(key, int) else (f"{self.path}.{key}" if self.path else key)
        value = self.value[key]
        return Node(value, self.file, sub)

    # ---- shape checks -------------------------------------------------------------------
    def mapping(self, allowed: Iterable[str], required: Iterable[str] = ()) -> dict[str, "Node"]:
        if not isinstance(self.value, dict):
            raise self.error(f"expected a mapping, got {_kind(self.value)}")
        allowed = list(allowed)
        for key in self.value:
            if not isinstance(key, str):
                raise self.error(f"keys must be strings, got {key!r}")
            if key not in allowed:
                raise SpecError(self.file, self.child(key).path, f"unknown key; expected one of: {', '.join(allowed)}")
        for key in required:
            if key not in self.value:
                raise self.error(f"missing required key '{key}'")
        return {k: self.child(k) for k in self.value}

    def tag(self, key: str, choices: Iterable[str]) -> str:
        """The tag of a tagged mapping (``{dist: uniform, ...}``), checked before its other keys."""
        if not isinstance(self.value, dict):
            raise self.error(f"expected a mapping, got {_kind(self.value)}")
        if key not in self.value:
            raise self.error(f"missing required key '{key}'")
        return self.child(key).string(choices)

    def seq(self, min_len: int = 0, max_len: int | None = None) -> list["Node"]:
        if not isinstance(self.value, list):
            raise self.error(f"expected a list, got {_kind(self.value)}")
        if len(self.value) < min_len:
            raise self.error(f"expected at least {min_len} entries, got {len(self.value)}")
        if max_len is not None and len(self.value) > max_len:
            raise self.error(f"expected at most {max_len} entries, got {len(self.value)}")
        return [self.child(i) for i in range(len(self.value))]

    def string(self, choices: Iterable[str] | None = None) -> str:
        if not isinstance(self.value, str):
            raise self.error(f"expected a string, got {_kind(self.value)}")
        if choices is not None:
            choices = list(choices)
            if self.value not in choices:
                raise self.error(f"expected one of: {', '.join(choices)}; got '{self.value}'")
        return self.value

    def integer(self, lo: int | None = None, hi: int | None = None) -> int:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
                v = int(v)
            else:
                raise self.error(f"expected an integer, got {_kind(self.value)}")
        _check_range(self, v, lo, hi)
        return v

    def number(self, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> float:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(f"expected a number, got {_kind(v)}")
        if isinstance(v, int) and abs(v) > 1e300:  # beyond any float
            raise self.error(f"expected a finite number, got {_num(v)}")
        v = float(v)
        if not math.isfinite(v):
            raise self.error(f"expected a finite number, got {v}")
        if lo_open and lo is not None and v <= lo:
            raise self.error(f"expected a number > {lo:g}, got {v:g}")
        _check_range(self, v, lo, hi)
        return v

    def boolean(self) -> bool:
        if not isinstance(self.value, bool):
            raise self.error(f"expected true or false, got {_kind(self.value)}")
        return self.value


def _check_range(node: Node, v: float, lo, hi) -> None:
    if lo is not None and v < lo:
        raise node.error(f"expected a value >= {lo:g}, got {_num(v)}")
    if hi is not None and v > hi:
        raise node.error(f"expected a value <= {hi:g}, got {_num(v)}")


def _num(v: float) -> str:
    """``f"{v:g}"``, also for an integer too large for a float."""
    return f"{v:g}" if abs(v) <= 1e300 else f"an integer {'above' if v > 0 else 'below -'}1e300"


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {dict: "a mapping", list: "a list", str: f"the string {value!r}", bool: f"{value}"}.get(
        type(value), f"{type(value).__name__} {value!r}"
    )


def opt(fields: dict[str, Node], key: str, default, read):
    """``read(node)`` if key is present, else ``default``."""
    return read(fields[key]) if key in fields else default
