"""One recorded exchange, and how it is read from a cassette's YAML data.

Reading checks every field where it is read (see ``_fields``): a cassette
edited by hand or written by another tool that has a wrong field is refused by
the field's path, e.g. ``interactions[0].response.dsh_replay.fragments[3]``, not
by the Python error it would cause in matching or in a paced replay.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from ..protocol.fields import (
    FieldError,
    check,
    is_int,
    is_list,
    is_mapping,
    is_name,
    is_number,
    is_text,
    or_null,
    read,
)

if TYPE_CHECKING:
    # vcr is imported where it is used: importing it at start-up would defeat
    # pytest-recording's assertion rewriting of vcr.matchers (a warning, an
    # error under filterwarnings=error) when both plugins are installed
    from vcr.request import Request as VcrRequest

__all__ = ["Interaction", "RecordedError", "as_bytes", "headers_dict", "interaction_from_dict", "vcr_request_class"]

_LIGHT_VCR = threading.Lock()
_REQUEST_CLASS: list[type[VcrRequest]] = []  # once imported


def vcr_request_class() -> type[VcrRequest]:
    """vcrpy's ``Request``; its ``vcr.request`` and ``vcr.matchers`` imported light when ``vcr`` is not yet.

    ``vcr/__init__.py`` imports ``VCR``, and through it vcrpy's patches of every
    HTTP client it finds installed (aiohttp, botocore, requests, urllib3,
    tornado...): half a command's start-up, for a class and matchers that need
    none of it. So the package is first entered without running its
    ``__init__``; the first name asked of it that its submodules did not set
    (``vcr.VCR``, ``vcr.use_cassette``...) runs the ``__init__`` then, in the
    same module, and everything vcrpy has is there as an ordinary import
    would have it.
    """
    if _REQUEST_CLASS:
        return _REQUEST_CLASS[0]
    if "vcr" not in sys.modules:
        with _LIGHT_VCR:
            if "vcr" not in sys.modules:
                _enter_vcr_light()
    from vcr.request import Request

    _REQUEST_CLASS.append(Request)
    return _REQUEST_CLASS[0]


def _enter_vcr_light() -> None:
    spec = importlib.util.find_spec("vcr")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed, or not as a package: the ordinary import says so
    loader = spec.loader
    package = importlib.util.module_from_spec(spec)
    running = threading.Lock()

    def rest_of_package(name: str) -> Any:
        with running:  # the first name asked for runs the __init__, once
            if package.__dict__.get("__getattr__") is rest_of_package:
                del package.__dict__["__getattr__"]
                try:
                    loader.exec_module(package)
                except BaseException:
                    if sys.modules.get("vcr") is package:
                        del sys.modules["vcr"]  # as a failed import leaves it: tried again next time
                    raise
        return _attribute(package, name)

    package.__dict__["__getattr__"] = rest_of_package
    sys.modules["vcr"] = package
    try:
        importlib.import_module("vcr.request")
        importlib.import_module("vcr.matchers")
    except BaseException:
        for name in ("vcr", "vcr.request", "vcr.matchers", "vcr.util"):
            sys.modules.pop(name, None)
        raise


def _attribute(module: ModuleType, name: str) -> Any:
    try:
        return module.__dict__[name]
    except KeyError:
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None


@dataclass(frozen=True, slots=True)
class RecordedError:
    """A stream that failed while recording: the exception kind and where it struck."""

    kind: str
    message: str
    offset: int
    at_ms: float


@dataclass(slots=True, kw_only=True)
class Interaction:
    """One request and its (streamed) response."""

    request: VcrRequest
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    fragments: list[tuple[float, int]] | None = None
    complete: bool = True
    error: RecordedError | None = None
    played: bool = False

    def fragment_sizes(self) -> list[int]:
        if not self.fragments:
            return [len(self.body)] if self.body else []
        return [size for _, size in self.fragments]


def headers_dict(headers: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in headers:
        out.setdefault(name, []).append(value)
    return out


def as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"body must be a string, got {type(value).__name__}")


#: no recorded stream lasts a day: a later time is corrupt, and would make a paced replay sleep for ever
_MAX_MS = 24 * 60 * 60 * 1000.0
_BODY = "a string, !!binary bytes or null"
_MS = f"a time in ms from 0 to {_MAX_MS:.0f}"


def _is_body(value: Any) -> bool:
    return value is None or isinstance(value, (str, bytes))


def _is_ms(value: Any) -> bool:
    return is_number(value, 0, _MAX_MS)


def _is_fragment(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and _is_ms(value[0]) and is_int(value[1], 1)


def _is_url(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        _ = urlparse(value).port  # vcrpy's matchers read it: a broken host or port raises
    except ValueError:
        return False
    return True


def _is_header_map(value: Any) -> bool:
    return value is None or (isinstance(value, Mapping) and all(isinstance(name, str) for name in value))


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _headers(raw: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    """The ``headers`` of a request or response: names to a string or a list of strings."""
    pairs = _plain_header_pairs(raw.get("headers"))
    return pairs if pairs is not None else _checked_headers(raw, where)


def _plain_header_pairs(headers: Any) -> list[tuple[str, str]] | None:
    # The usual case — a dict of str names to one-string lists, as dumped — read
    # without a path per header; anything else (None, subclasses, a wrong value)
    # goes through _checked_headers, which names what is wrong.
    if type(headers) is not dict:
        return None
    pairs: list[tuple[str, str]] = []
    for name, values in headers.items():
        if type(name) is not str:
            return None
        if type(values) is list and len(values) == 1 and type(values[0]) is str:
            pairs.append((name, values[0]))
        elif type(values) is str:
            pairs.append((name, values))
        elif type(values) is list and all(type(value) is str for value in values):
            pairs += ((name, value) for value in values)
        else:
            return None
    return pairs


def _checked_headers(raw: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    headers = read(raw, "headers", where, "a mapping of header names to lists of strings", _is_header_map, None)
    pairs: list[tuple[str, str]] = []
    for name, values in (headers or {}).items():
        if isinstance(values, str):
            values = [values]
        pairs += ((name, v) for v in check(values, f"{where}.headers.{name}", "a list of strings", _is_str_list))
    return pairs


def _request_from_dict(raw: Mapping[str, Any], where: str) -> VcrRequest:
    return vcr_request_class()(
        read(raw, "method", where, "an HTTP method such as POST", is_name),
        read(raw, "uri", where, "a URL", _is_url),
        read(raw, "body", where, _BODY, _is_body, None),
        headers_dict(_headers(raw, where)),
    )


def _response_body(response: Mapping[str, Any], where: str) -> bytes:
    """vcrpy's ``body: {string: ...}``, or a bare string as some tools write it."""
    body = response.get("body")
    if isinstance(body, Mapping):
        return as_bytes(read(body, "string", f"{where}.body", _BODY, _is_body, None))
    return as_bytes(check(body, f"{where}.body", f"a mapping with 'string', or {_BODY}", _is_body))


def _fragments(extra: Mapping[str, Any], body: bytes, where: str) -> list[tuple[float, int]] | None:
    raw = read(extra, "fragments", where, "a list of [ms, bytes] pairs, or null", or_null(is_list), None)
    if raw is None:
        return None
    fragments = _plain_fragments(raw)
    if fragments is None:
        fragments = _checked_fragments(raw, where)
    total = sum(size for _, size in fragments)
    if total != len(body):
        raise FieldError(f"{where}.fragments add up to {total} bytes but the body has {len(body)}")
    return fragments


def _plain_fragments(raw: list[Any]) -> list[tuple[float, int]] | None:
    # the usual case, [ms, bytes] pairs of plain numbers, without naming each item's
    # path; None leaves the list to the checked reading, which names the bad item
    fragments: list[tuple[float, int]] = []
    for item in raw:
        if type(item) is not list or len(item) != 2:
            return None
        ms, size = item
        if not ((type(ms) is float or type(ms) is int) and 0 <= ms <= _MAX_MS and type(size) is int and size >= 1):
            return None
        fragments.append((float(ms), size))
    return fragments


def _checked_fragments(raw: list[Any], where: str) -> list[tuple[float, int]]:
    what = f"an [ms since headers, bytes] pair: {_MS} and a positive integer byte count"
    return [
        (float(ms), size)
        for ms, size in (check(item, f"{where}.fragments[{n}]", what, _is_fragment) for n, item in enumerate(raw))
    ]


def _recorded_error(extra: Mapping[str, Any], where: str) -> RecordedError | None:
    what = "a mapping with kind, message, offset and at_ms, or null"
    raw = read(extra, "error", where, what, or_null(is_mapping), None)
    if raw is None:
        return None
    where = f"{where}.error"
    return RecordedError(
        kind=read(raw, "kind", where, "an exception name such as ReadError", is_name),
        message=read(raw, "message", where, "a string or null", or_null(is_text), "") or "",
        # beyond the body's end is allowed: a body filter may have shortened the body
        offset=read(raw, "offset", where, "a byte offset (an integer >= 0)", lambda value: is_int(value, 0)),
        at_ms=float(read(raw, "at_ms", where, _MS, _is_ms, 0.0)),
    )


def _plain_interaction(raw: Any) -> Interaction | None:
    """The interaction in ``raw`` when every field is of its usual, exact type and right; else ``None``.

    A cassette's interactions are read here without a path per field (each
    spelt-out path and checker is a good share of a load); anything unusual
    (a subclass, a missing field, a recorded error, a wrong value) is left to
    the checked reading below, which builds the same interaction or names
    what is wrong.
    """
    if type(raw) is not dict:
        return None
    request, response = raw.get("request"), raw.get("response")
    if type(request) is not dict or type(response) is not dict:
        return None
    method, uri, sent = request.get("method"), request.get("uri"), request.get("body")
    if type(method) is not str or not method or type(uri) is not str or not _is_url(uri):
        return None
    if not (sent is None or type(sent) is str or type(sent) is bytes):
        return None
    request_headers = _plain_header_pairs(request.get("headers"))
    status, headers = response.get("status"), _plain_header_pairs(response.get("headers"))
    if request_headers is None or headers is None or type(status) is not dict:
        return None
    code, reason = status.get("code"), status.get("message", "")
    if type(code) is not int or not 100 <= code <= 599 or not (reason is None or type(reason) is str):
        return None
    body = response.get("body")
    if type(body) is dict:
        body = body.get("string")
    if not (body is None or type(body) is str or type(body) is bytes):
        return None
    body = as_bytes(body)
    extra = response.get("dsh_replay")
    if extra is None:
        extra = {}
    elif type(extra) is not dict or extra.get("error") is not None:
        return None
    complete, fragments = extra.get("complete", True), extra.get("fragments")
    if type(complete) is not bool:
        return None
    if fragments is not None:
        if type(fragments) is not list:
            return None
        fragments = _plain_fragments(fragments)
        if fragments is None or sum(size for _, size in fragments) != len(body):
            return None
    return Interaction(
        request=vcr_request_class()(method, uri, sent, headers_dict(request_headers)), status=code,
        reason=reason or "",
        headers=headers, body=body, fragments=fragments, complete=complete,
    )


def interaction_from_dict(raw: Any, where: str) -> Interaction:
    plain = _plain_interaction(raw)
    if plain is not None:
        return plain
    check(raw, where, "a mapping with 'request' and 'response'", is_mapping)
    request = _request_from_dict(read(raw, "request", where, "a mapping", is_mapping), f"{where}.request")
    response = read(raw, "response", where, "a mapping", is_mapping)
    where = f"{where}.response"
    status = read(response, "status", where, "a mapping with 'code' and 'message'", is_mapping)
    extra = read(response, "dsh_replay", where, "a mapping or null", or_null(is_mapping), None) or {}
    body = _response_body(response, where)
    return Interaction(
        request=request,
        status=read(status, "code", f"{where}.status", "an integer HTTP status", lambda v: is_int(v, 100, 599)),
        reason=read(status, "message", f"{where}.status", "a string or null", or_null(is_text), "") or "",
        headers=_headers(response, where),
        body=body,
        fragments=_fragments(extra, body, f"{where}.dsh_replay"),
        complete=read(extra, "complete", f"{where}.dsh_replay", "true or false", lambda v: isinstance(v, bool), True),
        error=_recorded_error(extra, f"{where}.dsh_replay"),
    )
