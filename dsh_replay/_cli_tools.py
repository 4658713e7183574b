"""``dsh-replay trace``, ``diff``, ``show``, ``scan``, ``record`` and ``routes``."""

from __future__ import annotations

import asyncio
import base64
import difflib
import os
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import orjson
import yaml

from ._cassette import Cassette, Interaction, unwritable_reason
from ._chunks import Finish, FinishReason, Usage, UsageChunk
from ._collect import collect
from ._exceptions import CassetteError, ConfigError, DshReplayError
from ._golden import golden_path_for
from ._intercept import install, replay_response, uninstall
from ._jsonl import block_to_json, chunk_to_json, dump_jsonl, load_golden
from ._options import GenerateOptions
from ._pacing import Fragmentation
from ._replay import Outcome, case_options, judge_golden, run_adapter, trace_body
from ._routes import RouteTable
from ._secrets import Located, find_file_secrets
from ._use_cassette import use_cassette

__all__ = ["run_diff", "run_record", "run_routes", "run_scan", "run_show", "run_trace"]


def _verdict(outcome: Outcome, err: TextIO) -> int:
    for violation in outcome.violations:
        err.write(f"{violation.rule} at chunk {violation.position}: {violation.message}\n")
    if outcome.raised is not None:
        err.write(f"raised {type(outcome.raised).__name__}: {outcome.raised}\n")
    if not outcome.violations and outcome.raised is None:
        err.write(f"ok: {len(outcome.chunks)} chunks, {outcome.blocks} block(s); rules P1-P12 hold\n")
        return 0
    if not outcome.violations:
        err.write(f"{len(outcome.chunks)} chunks before the error; rules hold for them\n")
    return 1


def run_trace(route: str, source: str, out: TextIO, err: TextIO, *, fragmentation: str, drop_reasoning: bool,
              routes: RouteTable | None = None) -> int:
    if source == "-":
        if sys.stdin.isatty():
            err.write("reading the body from stdin; end it with Ctrl-D\n")
        body = sys.stdin.buffer.read()
    else:
        try:
            body = Path(source).read_bytes()
        except OSError as exc:
            raise DshReplayError(f"{source}: cannot read ({exc.strerror or exc})") from None
    table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
    outcome = asyncio.run(trace_body(body, route=route, routes=table, fragmentation=fragmentation,
                                     drop_reasoning=drop_reasoning))
    _write_bytes(out, outcome.golden_bytes())
    return _verdict(outcome, err)


def _write_bytes(out: TextIO, data: bytes) -> None:
    """``data`` exactly: through the binary buffer when there is one (no newline or encoding translation)."""
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        out.write(data.decode("utf-8"))
        return
    out.flush()
    buffer.write(data)
    buffer.flush()


# -- diff -----------------------------------------------------------------------


def _block_label(position: int, block: Any) -> str:
    data = block_to_json(block)
    name = f" {data['name']}" if "name" in data else ""
    return f"block {position} ({data['type']}{name})"


def _mark_span(old: str, new: str) -> tuple[str, str]:
    """Both strings with the differing middle bracketed: ``abc[XY]def``."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    def mark(text: str) -> str:
        return repr(text[:start] + "[" + text[start:len(text) - end] + "]" + text[len(text) - end:])
    return mark(old), mark(new)


def run_diff(a: str, b: str, out: TextIO) -> int:
    left, right = load_golden(a), load_golden(b)
    old_turn, new_turn = collect(left.chunks), collect(right.chunks)
    lines: list[str] = []
    for position in range(max(len(old_turn.blocks), len(new_turn.blocks))):
        if position >= len(old_turn.blocks):
            lines.append(f"{_block_label(position, new_turn.blocks[position])}: only in {b}")
            continue
        if position >= len(new_turn.blocks):
            lines.append(f"{_block_label(position, old_turn.blocks[position])}: only in {a}")
            continue
        old, new = block_to_json(old_turn.blocks[position]), block_to_json(new_turn.blocks[position])
        if old == new:
            continue
        label = _block_label(position, old_turn.blocks[position])
        if old["type"] != new["type"]:
            lines.append(f"{label}: type differs ({old['type']} vs {new['type']})")
            continue
        for field in ("text", "arguments", "id", "name", "signature"):
            if old.get(field) != new.get(field):
                lines.append(f"{label}: {field} differs")
                marked_old, marked_new = _mark_span(str(old.get(field, "")), str(new.get(field, "")))
                lines += [f"  - {marked_old}", f"  + {marked_new}"]
    for what, old_value, new_value in (
        ("usage", _usage_json(old_turn.usage), _usage_json(new_turn.usage)),
        ("finish", _reason_json(old_turn.finish_reason), _reason_json(new_turn.finish_reason)),
        ("raised", left.raised and left.raised.to_json(), right.raised and right.raised.to_json()),
    ):
        if old_value != new_value:
            lines += [f"{what} differs:", f"  - {_json_text(old_value)}", f"  + {_json_text(new_value)}"]
    old_bytes, new_bytes = dump_jsonl(left.chunks, left.raised), dump_jsonl(right.chunks, right.raised)
    if old_bytes == new_bytes:
        out.write("identical\n")
        return 0
    if not lines:
        lines.append("the blocks are the same; the chunking differs")
    out.write("\n".join(lines) + "\n\n")
    out.write(_line_diff(old_bytes, new_bytes, a, b))
    return 1


def _usage_json(usage: Usage | None) -> Any:
    return None if usage is None else chunk_to_json(UsageChunk(usage=usage))["usage"]


def _reason_json(reason: FinishReason | None) -> Any:
    return None if reason is None else chunk_to_json(Finish(reason=reason))["reason"]


def _json_text(value: Any) -> str:
    return "(none)" if value is None else orjson.dumps(value).decode()


def _line_diff(old_bytes: bytes, new_bytes: bytes, a: str, b: str) -> str:
    """The chunk-by-chunk line diff, ``-`` for A and ``+`` for B."""
    # split on \n only: a chunk's text may hold U+2028 or U+0085, which splitlines() would cut at
    old, new = old_bytes.decode().split("\n")[:-1], new_bytes.decode().split("\n")[:-1]
    lines = [f"--- {a} ({len(old)} line(s))", f"+++ {b} ({len(new)} line(s))"]
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(2):
        lines.append(f"@@ line {group[0][1] + 1} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [f"  {line}" for line in old[i1:i2]]
            else:
                lines += [f"- {line}" for line in old[i1:i2]] + [f"+ {line}" for line in new[j1:j2]]
    return "\n".join(lines) + "\n"


# -- show -------------------------------------------------------------------------


class _Timeline:
    """Serves a cassette's interactions in order and notes which fragment is being read."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.position = 0
        self.fragment = -1

    def handle(self, request: Any, inner: Any, lib: types.ModuleType, is_async: bool) -> Any:
        if self.position >= len(self.cassette.interactions):
            raise CassetteError(f"{self.cassette.path}: the adapter made more requests than were recorded")
        interaction = self.cassette.interactions[self.position]
        self.position += 1
        response = replay_response(lib, request, interaction, fragmentation=Fragmentation("recorded"), speed=0.0,
                                   fault=None, path=str(self.cassette.path), is_async=is_async)
        inner_stream = response.stream.source

        async def counting() -> Any:
            async for piece in inner_stream:
                self.fragment += 1
                yield piece

        response.stream.source = counting()
        return response


def _summary(interaction: Interaction) -> str:
    try:
        body = orjson.loads(interaction.request.body or b"")
    except orjson.JSONDecodeError:
        return f"{len(interaction.request.body or b'')} bytes"
    if not isinstance(body, dict):
        return type(body).__name__
    facts = [f"model={body.get('model')}"] if "model" in body else []
    for key in ("messages", "contents", "input", "tools"):
        if isinstance(body.get(key), list):
            facts.append(f"{key}={len(body[key])}")
    return ", ".join(facts) or ", ".join(list(body)[:6])


def run_show(path: str, out: TextIO, *, routes: RouteTable | None = None) -> int:
    cassette = Cassette.load(path)
    meta = cassette.metadata
    out.write(f"cassette {path}  route={meta.get('route', '?')}  {meta.get('library', 'plain vcrpy')}\n")
    for number, interaction in enumerate(cassette.interactions):
        request = interaction.request
        query = urlsplit(request.uri).query
        out.write(f"\ninteraction {number}: {request.method} {request.path}{'?' + query if query else ''}\n")
        out.write(f"  request: {_summary(interaction)}\n")
        headers = ", ".join(f"{k}: {v}" for k, v in request.headers.items() if k.lower() not in ("host", "content-length"))
        out.write(f"  headers: {headers}\n")
        state = "complete" if interaction.complete else "closed by the caller before the end of the body"
        error = f", failed with {interaction.error.kind} at byte {interaction.error.offset}" if interaction.error else ""
        out.write(f"  response: {interaction.status} {interaction.reason}, {len(interaction.body)} bytes in "
                  f"{len(interaction.fragment_sizes())} fragment(s), {state}{error}\n")
    chunks_by_fragment: dict[int, list[str]] = {}
    outcome: Outcome | None = None
    if "route" in meta:
        try:
            route, calls, base_url = case_options(cassette)
            adapter = (routes or RouteTable.load(pyproject=Path("pyproject.toml"))).adapter(route, base_url=base_url)
        except DshReplayError as exc:
            out.write(f"\n(chunks not shown: {exc})\n")
        else:
            timeline = _Timeline(cassette)

            async def run() -> Outcome:
                result = Outcome()
                install(timeline)
                try:
                    for options in calls:
                        async for chunk in adapter.stream(options):
                            result.chunks.append(chunk)
                            chunks_by_fragment.setdefault(timeline.fragment, []).append(
                                orjson.dumps(chunk_to_json(chunk)).decode())
                except Exception as exc:  # shown in the timeline, not raised
                    result.raised = exc
                finally:
                    uninstall(timeline)
                return result

            outcome = asyncio.run(run())
    _fragments(cassette, chunks_by_fragment, outcome, out)
    return 0


def _fragments(cassette: Cassette, chunks: dict[int, list[str]], outcome: Outcome | None, out: TextIO) -> None:
    """One row per fragment (arrival ms, byte offset, size, the bytes), the chunks it released under it."""
    out.write(f"\n{'ms':>7}  {'offset':>7}  {'bytes':>6}  fragment → chunks\n")
    index = 0
    first_chunk_ms: float | None = None
    for number, interaction in enumerate(cassette.interactions):
        if len(cassette.interactions) > 1:
            out.write(f"{'':25}(interaction {number})\n")
        at = 0
        # the pieces replay serves: the recorded fragments, or the whole body as one
        for ms, size in interaction.fragments or ([(0.0, len(interaction.body))] if interaction.body else []):
            piece = interaction.body[at:at + size].decode("utf-8", "replace")
            preview = piece.replace("\r", "\\r").replace("\n", "\\n")
            out.write(f"{ms:7.1f}  {at:7}  {size:6}  {preview[:70]}{'…' if len(preview) > 70 else ''}\n")
            at += size
            for line in chunks.get(index, []):
                if first_chunk_ms is None:
                    first_chunk_ms = ms
                out.write(f"{'':25}→ {line[:110]}\n")
            index += 1
    if outcome is not None and outcome.raised is not None:
        out.write(f"{'':25}→ raised {type(outcome.raised).__name__}: {outcome.raised}\n")
    first = cassette.interactions[0].fragments if cassette.interactions else None
    ttfb = f"{first[0][0]:.1f} ms" if first else "n/a"
    ttfc = f"{first_chunk_ms:.1f} ms" if first_chunk_ms is not None else "n/a"
    out.write(f"\ntime to first byte: {ttfb}; time to first chunk: {ttfc}\n")


# -- scan -----------------------------------------------------------------------------


def run_scan(paths: Sequence[str], out: TextIO) -> int:
    files: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in _SCANNED and p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            raise DshReplayError(f"{path}: no such file or folder")
    hits = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for hit in find_file_secrets(text, _located_values(path, text)):
            hits += 1
            out.write(f"{path}: {hit}\n")
    if hits:
        out.write("remove them (scrub the header, query parameter or body) and rotate any real key\n")
    out.write(f"scanned {len(files)} file(s): {hits} secret(s) found\n")
    return 1 if hits else 0


_SCANNED = (".yaml", ".yml", ".jsonl", ".json")
_BINARY_TAG = "tag:yaml.org,2002:binary"


def _located_values(path: Path, text: str) -> list[Located]:
    """A file's parsed values with their fields and lines, so a hit names its field.

    A line or a file that does not parse gives none: the raw text scan reads it.
    """
    if path.suffix == ".jsonl":
        values: list[Located] = []
        for number, line in enumerate(text.split("\n"), start=1):
            try:
                values.append(Located(f"line {number}", orjson.loads(line), number, number))
            except orjson.JSONDecodeError:
                continue
        return values
    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    return list(_yaml_values(root)) if root is not None else []


def _yaml_values(root: yaml.Node) -> Iterator[Located]:
    """Every scalar of a YAML document (keys too), named as :func:`find_secrets` names fields.

    Nodes, not loaded values, because a node knows its lines. A node reached again
    through an alias is walked once (see ``find_secrets`` on alias bombs).
    """
    seen: set[int] = set()
    pending: list[tuple[str, yaml.Node]] = [("", root)]
    while pending:
        field, node = pending.pop()
        if isinstance(node, yaml.ScalarNode):
            first, end = node.start_mark.line + 1, node.end_mark
            # a block scalar ends at the start of the line after it
            last = end.line + 1 if end.column else end.line
            yield Located(field or "<value>", _scalar_value(node), first, max(first, last))
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[str, yaml.Node]] = []
        if isinstance(node, yaml.MappingNode):
            for key, item in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                children += [(field, key), (f"{field}.{name}" if field else str(name), item)]
        elif isinstance(node, yaml.SequenceNode):
            children = [(f"{field}[{position}]", item) for position, item in enumerate(node.value)]
        pending += reversed(children)


def _scalar_value(node: yaml.ScalarNode) -> str | bytes:
    if node.tag == _BINARY_TAG:
        try:
            return base64.b64decode("".join(str(node.value).split()), validate=True)
        except ValueError:  # binascii.Error: not base64 after all; the raw text scan still reads it
            pass
    return str(node.value)


# -- record / routes ------------------------------------------------------------------


def run_record(route: str, options_file: str, out_path: str, base_url: str | None, out: TextIO,
               routes: RouteTable | None = None, *, force: bool = False) -> int:
    if os.environ.get("CI"):
        raise ConfigError("record is refused because CI is set: CI only replays. Record locally and commit.")
    try:
        options = GenerateOptions.from_json(orjson.loads(Path(options_file).read_bytes()), "options")
    except ConfigError as exc:
        raise ConfigError(f"{options_file}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{options_file}: cannot read ({exc.strerror or exc})") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{options_file}: not valid JSON ({exc})") from None
    cassette = Path(out_path)
    _check_target(cassette, force=force)
    variable = key_variable(route)
    key = os.environ.get(variable, "")
    table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
    if route in table.registry:
        if base_url:
            # the plugin built this adapter with its own key and URL; --base-url cannot reach it
            raise ConfigError(
                f"route {route!r} comes from {table.sources.get(route, 'a plugin')}, whose adapter the plugin "
                "builds: set its base URL in the plugin YAML (e.g. baseUrl: ${MY_BASE_URL}) instead of --base-url"
            )
        adapter = table.registry.resolve(route)
    else:
        factory = table.factories.get(route)
        if factory is None:
            table.adapter(route)  # raises the unknown-route error listing the routes
            raise AssertionError
        if not key and route not in _KEY_OPTIONAL:
            raise ConfigError(f"route {route!r} needs its key in the environment variable {variable}")
        adapter = factory(api_key=key, **({"base_url": base_url} if base_url else {}))

    async def go() -> Outcome:
        async with use_cassette(cassette, "rewrite", route=route, options=options) as session:
            if isinstance(getattr(adapter, "base_url", None), str):
                session.cassette.metadata["base_url"] = adapter.base_url  # type: ignore[attr-defined]
            outcome = await run_adapter(adapter, options)
            if not session.recorded:
                # raising here keeps an older cassette instead of deleting it, and writes no golden
                raise DshReplayError(
                    f"nothing was recorded into {cassette}: the call failed before any response "
                    f"({type(outcome.raised).__name__}: {outcome.raised}). Check --base-url and the network, "
                    "then run record again"
                )
            return outcome

    outcome = asyncio.run(go())
    status, _ = judge_golden(cassette, outcome.golden_bytes(), update=True)
    out.write(f"recorded {cassette} ({len(outcome.chunks)} chunks); golden {golden_path_for(cassette)} {status}\n")
    return _verdict(outcome, out)


def _check_target(cassette: Path, *, force: bool) -> None:
    """Refuse an ``--out`` that cannot take the cassette and its golden before the call is paid for.

    A recorded cassette is a reviewed, committed artifact: replacing it (or the
    golden beside it) takes ``--force``, as ``--record-mode=once`` keeps one too.
    """
    if cassette.suffix not in (".yaml", ".yml"):
        raise ConfigError(f"--out {cassette}: name a .yaml file (check and collection look for *.yaml)")
    golden = golden_path_for(cassette)
    for target in (cassette, golden):
        if reason := unwritable_reason(target):
            raise ConfigError(f"--out {cassette}: {reason}; remove it or choose another name")
    existing = [str(target) for target in (cassette, golden) if target.is_file()]
    if existing and not force:
        raise ConfigError(
            f"--out {cassette}: {' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
            "pass --force to overwrite, or choose another name"
        )


def key_variable(route: str) -> str:
    """The environment variable ``record`` reads the key of ``route`` from (plugin routes get theirs from the YAML)."""
    from .adapters import BUILTIN_ROUTES

    return BUILTIN_ROUTES[route][2] if route in BUILTIN_ROUTES else f"{route.upper().replace('-', '_')}_API_KEY"


#: local servers take no key
_KEY_OPTIONAL = frozenset(("ollama", "openai-compatible"))


def run_routes(out: TextIO, table: RouteTable) -> int:
    width = max(len(r) for r in table.routes())
    for route in table.routes():
        out.write(f"{route.ljust(width)}  {table.sources.get(route, '')}\n")
    return 0

