"""``dsh-replay record``: one live call recorded into a cassette and its golden."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

import orjson

from ..adapters.route_table import RouteTable
from ..cassette.files import unwritable_reason
from ..cassette.golden import golden_path_for
from ..cassette.replay import Outcome, judge_golden, run_adapter
from ..cassette.session import use_cassette
from ..errors import ConfigError, DshReplayError
from ..protocol.options import GenerateOptions
from .common import add_plugins, clean_stale_temp_files, config_inputs, output_conflict, route_table
from .trace import print_verdict

__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "key_variable", "run", "run_record"]


def run_record(route: str, options_file: str, out_path: str, base_url: str | None, out: TextIO,
               routes: RouteTable | None = None, *, force: bool = False,
               also_read: Mapping[str, Iterable[Path]] | None = None) -> int:
    started = time.time()
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
    _check_target(cassette, force=force, inputs={"the --options file": [Path(options_file)], **(also_read or {})})
    clean_stale_temp_files([cassette], older_than=started)  # what a killed record left beside the cassette
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

    async def go() -> tuple[Outcome, bytes]:
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
            return outcome, session.mask(outcome.golden_bytes())

    outcome, golden = asyncio.run(go())
    status, _ = judge_golden(cassette, golden, update=True)
    out.write(f"recorded {cassette} ({len(outcome.chunks)} chunks); golden {golden_path_for(cassette)} {status}\n")
    return print_verdict(outcome, out)


def _check_target(cassette: Path, *, force: bool, inputs: Mapping[str, Iterable[Path]]) -> None:
    """Refuse an ``--out`` that cannot take the cassette and its golden before the call is paid for.

    A recorded cassette is a reviewed, committed artifact: replacing it (or the
    golden beside it) takes ``--force``, as ``--record-mode=once`` keeps one too.
    Replacing a file the command reads (``inputs``: the options, the plugin YAML)
    is refused even with ``--force``, which is the habit of re-recording, not a
    wish to lose the options file.
    """
    if cassette.suffix not in (".yaml", ".yml"):
        raise ConfigError(f"--out {cassette}: name a .yaml file (check and collection look for *.yaml)")
    golden = golden_path_for(cassette)
    for what, target in (("cassette", cassette), ("golden", golden)):
        if reason := unwritable_reason(target):
            raise ConfigError(f"--out {cassette}: {reason}; remove it or choose another name")
        # writing a cassette is the point here: only the files read are guarded
        if reason := output_conflict(target, inputs, cassettes_too=False):
            raise ConfigError(f"refusing to write the {what} to {target}: {reason}; choose another --out")
    existing = [str(target) for target in (cassette, golden) if target.is_file()]
    if existing and not force:
        raise ConfigError(
            f"--out {cassette}: {' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
            "pass --force to overwrite, or choose another name"
        )


def key_variable(route: str) -> str:
    """The environment variable ``record`` reads the key of ``route`` from (plugin routes get theirs from the YAML)."""
    from ..adapters import BUILTIN_ROUTES

    return BUILTIN_ROUTES[route][2] if route in BUILTIN_ROUTES else f"{route.upper().replace('-', '_')}_API_KEY"


#: local servers take no key
_KEY_OPTIONAL = frozenset(("ollama", "openai-compatible"))


DESCRIPTION = (
    "Call the real provider once and record the exchange into CASSETTE (+ its golden). The key\n"
    "comes from the route's environment variable: OPENAI_API_KEY (openai, openai-responses),\n"
    "OPENAI_COMPATIBLE_API_KEY, DEEPSEEK_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY,\n"
    "OLLAMA_API_KEY (optional), or <ROUTE>_API_KEY for configured routes. Refused when CI is set.\n"
    "An existing CASSETTE or golden is kept unless --force is given."
)
EXAMPLE = "dsh-replay record --route openai --options options.json --out cassettes/openai/hello.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--route", required=True)
    parser.add_argument("--options", required=True, metavar="FILE", help="GenerateOptions as JSON")
    parser.add_argument("--out", required=True, metavar="CASSETTE")
    parser.add_argument("--base-url", default=None, metavar="URL", help="the provider's root URL (a proxy, a local server)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing CASSETTE and its golden")
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_record(args.route, args.options, args.out, args.base_url, out, routes=route_table(args),
                      force=args.force, also_read=config_inputs(args))
