"""A recording configuration in vcrpy's words: the ``dsh_replay_config`` dict, checked.

Keys follow vcrpy (and pytest-recording's ``vcr_config``) where they exist:
``filter_headers``, ``filter_query_parameters``, ``filter_post_data_parameters``,
``before_record_request``, ``before_record_response``, ``match_on``,
``record_mode``; and ours: ``cassette_dir``, ``redact``, ``fragmentation``,
``speed``. While a pytest run is under way the plugin makes the test's
configuration *active*, and ``use_cassette`` takes its defaults from it.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DshReplayError
from .filters import RecordFilters, Rule
from .matching import Matcher, body_matcher, vcr_matchers
from .pacing import Fragmentation, parse_speed
from .store import RecordMode

__all__ = ["KEYS", "MATCHERS", "PYPROJECT_KEYS", "PYPROJECT_TABLES", "RecordingConfig", "activated", "active", "matchers_named", "parse_match_on"]

#: every key a configuration dict may hold
KEYS = (
    "filter_headers", "filter_query_parameters", "filter_post_data_parameters", "before_record_request",
    "before_record_response", "match_on", "record_mode", "cassette_dir", "redact", "fragmentation", "speed",
)

#: the keys ``[tool.dsh_replay]`` in pyproject.toml may hold for ``serve``: those TOML can spell
PYPROJECT_KEYS = ("match_on", "filter_headers", "filter_query_parameters", "filter_post_data_parameters", "redact")
#: the sub-tables of ``[tool.dsh_replay]`` other readers take: ``routes`` (adapter classes), ``hosts`` (plain cassettes)
PYPROJECT_TABLES = ("routes", "hosts")

#: vcrpy's matcher names; ``body`` is ours (equal as JSON data, key order free)
MATCHERS = ("method", "scheme", "host", "port", "path", "query", "uri", "headers", "body", "raw_body")


@dataclass(frozen=True, slots=True)
class RecordingConfig:
    """A checked configuration; ``None`` fields leave the decision to the next layer down."""

    record_mode: RecordMode | None = None
    cassette_dir: Path | None = None
    fragmentation: Fragmentation | None = None
    speed: float | None = None
    match_on: tuple[str, ...] | None = None
    filters: RecordFilters = field(default_factory=RecordFilters)

    @classmethod
    def from_mapping(cls, data: object, where: str, *, root: Path | None = None) -> RecordingConfig:
        """Check ``data`` (the fixture's dict); a bad key or value is a ``ConfigError`` naming it."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must return a dict of settings, got {type(data).__name__}")
        unknown = sorted(str(key) for key in data if key not in KEYS)
        if unknown:
            close = [m for name in unknown for m in difflib.get_close_matches(name, KEYS, n=1)]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}{hint}; valid: {', '.join(KEYS)}")

        def parsed(key: str, parse: Callable[[Any], Any]) -> Any:
            if data.get(key) is None:
                return None
            try:
                return parse(data[key])
            except DshReplayError as exc:
                raise ConfigError(f"{where}: {key}: {exc}") from None

        cassette_dir = data.get("cassette_dir")
        if cassette_dir is not None and not isinstance(cassette_dir, (str, Path)):
            raise ConfigError(f"{where}: cassette_dir must be a folder path, got {cassette_dir!r}")
        folder = Path(cassette_dir) if cassette_dir is not None else None
        if folder is not None and not folder.is_absolute() and root is not None:
            folder = root / folder
        return cls(
            record_mode=parsed("record_mode", RecordMode.parse),
            cassette_dir=folder,
            fragmentation=parsed("fragmentation", Fragmentation.parse),
            speed=parsed("speed", parse_speed),
            match_on=_match_on(data.get("match_on"), where),
            filters=RecordFilters(
                headers=_rules(data.get("filter_headers"), "filter_headers", where),
                query_parameters=_rules(data.get("filter_query_parameters"), "filter_query_parameters", where),
                post_data_parameters=_rules(data.get("filter_post_data_parameters"), "filter_post_data_parameters",
                                            where),
                redact=_patterns(data.get("redact"), where),
                before_record_request=_hook(data.get("before_record_request"), "before_record_request", where),
                before_record_response=_hook(data.get("before_record_response"), "before_record_response", where),
            ),
        )

    @classmethod
    def from_pyproject(cls, path: Path) -> RecordingConfig:
        """:data:`PYPROJECT_KEYS` from ``[tool.dsh_replay]`` of the pyproject at ``path``; empty when it has none."""
        from ..adapters.route_table import pyproject_table
        from ..protocol.fields import FieldError, refuse_unknown

        if not path.is_file():
            return cls()
        table = pyproject_table(path, ("tool", "dsh_replay"))
        where = f"{path} [tool.dsh_replay]"
        try:  # a key nothing reads is a typo, and a misspelt filter would let a secret through unseen
            refuse_unknown(table, where, (*PYPROJECT_KEYS, *PYPROJECT_TABLES))
        except FieldError as exc:
            raise ConfigError(str(exc)) from None
        return cls.from_mapping({key: table[key] for key in PYPROJECT_KEYS if key in table}, where)

    def matchers(self) -> list[Matcher] | None:
        """The matcher functions ``match_on`` names, or None for the default ones."""
        return None if self.match_on is None else matchers_named(self.match_on)


def matchers_named(names: Sequence[str]) -> list[Matcher]:
    """The matcher functions of checked ``match_on`` names (:func:`parse_match_on`)."""
    matchers = vcr_matchers()
    return [body_matcher if name == "body" else getattr(matchers, name) for name in names]


def parse_match_on(value: object, where: str) -> tuple[str, ...] | None:
    """``value`` as ``match_on`` names (None when not given); a ``ConfigError`` naming ``where`` otherwise."""
    return _match_on(value, where)


def _rules(value: object, key: str, where: str) -> tuple[Rule, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ConfigError(f"{where}: {key} must be a list of names (or (name, replacement) pairs), got {value!r}")
    rules: list[Rule] = []
    for item in value:
        if isinstance(item, str) and item:
            rules.append((item, None))
        elif (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str) and item[0]
              and (item[1] is None or isinstance(item[1], str))):
            rules.append((item[0], item[1]))
        else:
            raise ConfigError(
                f"{where}: {key}: {item!r} is neither a name (glob patterns allowed) nor a (name, replacement) "
                "pair; a replacement of None removes the item"
            )
    return tuple(rules)


def _patterns(value: object, where: str) -> tuple[re.Pattern[bytes], ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, (str, re.Pattern)) else value
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{where}: redact must be a list of regular expressions, got {value!r}")
    patterns = []
    for item in items:
        text = item.pattern if isinstance(item, re.Pattern) else item
        if isinstance(text, str):
            text = text.encode()
        if not isinstance(text, bytes) or not text:
            raise ConfigError(f"{where}: redact: {item!r} is not a regular expression")
        try:
            patterns.append(re.compile(text))
        except re.error as exc:
            raise ConfigError(f"{where}: redact: {item!r} is not a valid regular expression ({exc})") from None
    return tuple(patterns)


def _hook(value: object, key: str, where: str) -> Callable[..., Any] | None:
    if value is not None and not callable(value):
        raise ConfigError(f"{where}: {key} must be a function, got {value!r}")
    return value


def _match_on(value: object, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{where}: match_on must be a non-empty list of matcher names ({', '.join(MATCHERS)})")
    bad = [name for name in value if name not in MATCHERS]
    if bad:
        raise ConfigError(f"{where}: match_on: unknown matcher(s) {', '.join(map(repr, bad))}; valid: {', '.join(MATCHERS)}")
    return tuple(value)


# The configuration of the test now running. A plain stack, not a context
# variable: a test's own threads and event loops must see it too.
_ACTIVE: list[RecordingConfig] = []


def active() -> RecordingConfig | None:
    """The configuration ``use_cassette`` defaults to: the running test's, or None outside pytest."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def activated(config: RecordingConfig) -> Iterator[RecordingConfig]:
    _ACTIVE.append(config)
    try:
        yield config
    finally:
        _ACTIVE.remove(config)
