"""How a case's adapter is built: the ``dsh_replay.adapter`` settings of its cassette, read and checked in one place.

``dsh_replay: adapter: {drop_reasoning: true, default_query: {api-version: "2024-06-01"}}``.
Every command that builds a case's adapter from its cassette (replay, ``check``,
``show``'s timeline, drift) reads them through :func:`adapter_settings`, so a
setting added here reaches all of them and a bad one reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import CassetteError
from ..protocol.fields import shown
from ..wire.credentials import is_credential_parameter

if TYPE_CHECKING:
    from .store import Cassette

__all__ = ["AdapterSettings", "adapter_settings"]


@dataclass(frozen=True, slots=True)
class AdapterSettings:
    """The adapter settings a cassette was recorded (or imported) with."""

    #: the adapter drops reasoning blocks
    drop_reasoning: bool = False
    #: query parameters sent on every request (Azure OpenAI's ``api-version``); never a credential.
    #: Left out of the hash (a mapping has none); equal settings still hash alike.
    default_query: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``RouteTable.adapter`` and ``AdapterCache.adapter`` for these settings."""
        return {"drop_reasoning": self.drop_reasoning, "default_query": dict(self.default_query)}


def adapter_settings(cassette: Cassette) -> AdapterSettings:
    """The checked ``dsh_replay.adapter`` settings of ``cassette``; a bad one is a CassetteError naming the field."""
    raw = cassette.metadata.get("adapter")
    if raw is None:
        return AdapterSettings()
    where = f"cassette {cassette.path}: dsh_replay.adapter"

    def bad(field_name: str, wanted: str, value: object) -> CassetteError:
        return CassetteError(f"{where}{field_name} must be {wanted}, got {shown(value)}; fix it or re-record the "
                             "cassette", path=str(cassette.path))

    if not isinstance(raw, Mapping):
        raise bad("", "a mapping (drop_reasoning, default_query)", raw)
    drop = raw.get("drop_reasoning", False)
    if not isinstance(drop, bool):
        raise bad(".drop_reasoning", "true or false", drop)
    query = raw.get("default_query") or {}
    if not isinstance(query, Mapping):
        raise bad(".default_query", "a mapping of query parameter names to string values", query)
    for name, value in query.items():
        if not isinstance(name, str) or not name:
            raise bad(".default_query", "a mapping of query parameter names to string values", name)
        if is_credential_parameter(name):  # checked first: its value is never shown
            raise CassetteError(f"{where}.default_query.{name} is a credential parameter: a credential is sent in "
                                "a header, never kept in a cassette; remove it", path=str(cassette.path))
        if not isinstance(value, str):
            # YAML reads an unquoted 2024-06-01 as a date
            raise bad(f".default_query.{name}", "a string (quote it)", value)
    return AdapterSettings(drop_reasoning=drop, default_query=MappingProxyType(dict(query)))
