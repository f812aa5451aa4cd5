"""The one error type a user sees: a bad trace, named by file, key path and expectation."""
from __future__ import annotations


class SpecError(Exception):
    """Bad input. The CLI prints ``str(err)`` and exits with code 2, never a traceback."""

    def __init__(self, file: str | None, path: str, message: str):
        self.file = file
        self.path = path
        self.message = message
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.file or "<trace>"
        key = self.path or "(top level)"
        return f"{where}: {key}: {self.message}"
