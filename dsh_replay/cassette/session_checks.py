"""What ``use_cassette`` refuses up front: arguments of the wrong kind, and a fault that could never strike."""

from __future__ import annotations

from pathlib import Path

from ..errors import CassetteError
from ..protocol.options import GenerateOptions
from .filters import RecordFilters
from .pacing import Fault
from .scrub import Scrubber
from .store import Cassette

__all__ = ["check_arguments", "check_fault_reaches"]


def check_arguments(path: object, **named: object) -> None:
    """Refuse arguments of the wrong kind here, not as an AttributeError deep in a replay."""
    if not isinstance(path, (str, Path)) or not str(path):
        raise CassetteError(f"use_cassette: path must be a file path (str or Path), got {path!r}")
    kinds: dict[str, tuple[type, str]] = {
        "route": (str, "a route name"),
        "options": (GenerateOptions, "GenerateOptions"),
        "scrubber": (Scrubber, "a Scrubber"),
        "fault": (Fault, "a Fault"),
        "filters": (RecordFilters, "RecordFilters"),
    }
    for name, (kind, what) in kinds.items():
        value = named[name]
        if value is not None and not isinstance(value, kind):
            raise CassetteError(f"use_cassette: {name} must be {what} or None, got {value!r}")
    matchers = named["matchers"]
    if matchers is not None and (isinstance(matchers, (str, bytes)) or not all(callable(m) for m in matchers)):  # type: ignore[attr-defined]
        raise CassetteError(
            f"use_cassette: matchers must be a list of functions (request, recorded) -> bool, got {matchers!r}"
        )


def check_fault_reaches(fault: Fault, cassette: Cassette) -> None:
    """A fault that can never strike would pass as a tested error path: refuse it."""
    count = len(cassette.interactions)
    targets = range(count) if fault.interaction is None else [fault.interaction]
    if fault.interaction is not None and fault.interaction >= count:
        raise CassetteError(
            f"fault targets interaction {fault.interaction} but cassette {cassette.path} has {count} "
            f"(numbered from 0)", path=str(cassette.path),
        )
    # a reset or stall right after the last byte still strikes a client that reads
    # to the end; a truncation there changes nothing
    slack = 0 if fault.kind == "truncate" else 1
    if all(fault.at >= len(cassette.interactions[n].body) + slack for n in targets):
        sizes = ", ".join(str(len(cassette.interactions[n].body)) for n in targets)
        raise CassetteError(
            f"{fault.kind} fault at byte {fault.at} can never strike: the recorded bodies it targets in "
            f"{cassette.path} have {sizes} bytes; choose an offset inside the body", path=str(cassette.path),
        )
