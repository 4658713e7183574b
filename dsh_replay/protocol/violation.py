"""One broken StreamChunk rule, as the validator reports it.

A leaf module (it imports nothing of the package), so that ``_exceptions``
(whose ``ProtocolViolation`` carries violations), the validator and the CLI can
all name :class:`Violation` without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Violation"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: its id (``"P4"``), the 0-based chunk position, a one-line message."""

    rule: str
    position: int
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"
