"""Vertex AI's streamed function-call arguments (``partialArgs``), rebuilt into the arguments object.

Vertex streams a call's arguments as values by JSON path (``{"jsonPath": "$.location",
"stringValue": "Bos"}``), closed by an empty ``functionCall``; the Gemini adapter
collects them here and emits the whole object as one delta when the call completes.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from ..errors import MalformedStreamError

__all__ = ["apply_partial"]

# RFC 9535 paths as Vertex sends them: $.a.b, $.a[0], $['a b']
_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


def apply_partial(args: dict[str, Any], partial: object, route: str) -> None:
    """Set one ``PartialArg`` into ``args``; string pieces of one path concatenate."""
    path = partial.get("jsonPath") if isinstance(partial, dict) else None
    if not isinstance(partial, dict) or not isinstance(path, str) or not path.startswith("$"):
        raise MalformedStreamError(f"partialArgs entry without a jsonPath: {partial}", route=route)
    steps: list[str | int] = []
    for match in _STEP.finditer(path, 1):
        name, index, single, double = match.groups()
        steps.append(int(index) if index is not None else name or single or double or "")
    if not steps:
        raise MalformedStreamError(f"partialArgs jsonPath {path!r} names no argument", route=route)
    container: Any = args
    for step, following in itertools.pairwise(steps):
        container = _child(container, step, [] if isinstance(following, int) else {})
    last = steps[-1]
    if "stringValue" in partial:
        previous = _get(container, last)
        value: Any = (previous if isinstance(previous, str) else "") + str(partial["stringValue"])
    elif "numberValue" in partial:
        value = partial["numberValue"]
    elif "boolValue" in partial:
        value = partial["boolValue"]
    else:
        value = None  # nullValue
    _child(container, last, value, replace=True)


def _get(container: Any, step: str | int) -> Any:
    if isinstance(step, int):
        return container[step] if isinstance(container, list) and step < len(container) else None
    return container.get(step) if isinstance(container, dict) else None


def _child(container: Any, step: str | int, default: Any, *, replace: bool = False) -> Any:
    if isinstance(step, int) and isinstance(container, list):
        while len(container) <= step:
            container.append(None)
        if replace or container[step] is None:
            container[step] = default
        return container[step]
    if isinstance(step, str) and isinstance(container, dict):
        if replace or step not in container:
            container[step] = default
        return container[step]
    raise MalformedStreamError(f"partialArgs path step {step!r} does not fit {type(container).__name__}")
