"""What several commands share: argument types, the route table, and which output paths to refuse.

Kept light on purpose: ``main`` imports it for every command, including
``--help``, which must not pay for the adapters or the cassette engine.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..adapters.route_table import RouteTable
    from ..cassette.inferred import Inference

__all__ = [
    "FORCE_HELP",
    "FRAGMENTATION_HELP",
    "PLUGINS_HELP",
    "add_plugins",
    "add_route",
    "clean_stale_temp_files",
    "config_inputs",
    "fragmentation_type",
    "inference",
    "output_conflict",
    "refuse_output",
    "route_table",
]

FRAGMENTATION_HELP = "how bodies are cut into fragments: recorded, single, bytes, random[:SEED]"
PLUGINS_HELP = "a plugin YAML (cordis.yml shape) whose plugins register more routes"
FORCE_HELP = "write FILE even if it is a cassette, a golden or a file this command reads"


def fragmentation_type(value: str) -> str:
    """An argparse type: a fragmentation spelled as the options accept it."""
    from ..cassette.pacing import Fragmentation
    from ..errors import DshReplayError

    try:
        return str(Fragmentation.parse(value))
    except DshReplayError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_plugins(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plugins", default=None, metavar="YAML", help=PLUGINS_HELP)


def add_route(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--route", default=None, metavar="ROUTE",
                        help="read plain vcrpy cassettes (no dsh_replay metadata) as cases of ROUTE: options, "
                             "fragments and goldens inferred as import does, nothing written but goldens "
                             "([tool.dsh_replay.hosts] in pyproject.toml does it by host)")


def inference(args: argparse.Namespace, routes: RouteTable) -> Inference | None:
    """How the command reads plain vcrpy cassettes: its ``--route``, and ``[tool.dsh_replay.hosts]``.

    None when neither is given: plain cassettes are then skipped, and their reader is not even imported.
    """
    route = getattr(args, "route", None)
    if route is None and not routes.hosts:
        return None
    from ..cassette.inferred import Inference
    from ..errors import ConfigError
    from ..protocol.adapter import unknown_route_message

    if route is not None and route not in routes.routes():  # refused before any file is read
        raise ConfigError(f"--route: {unknown_route_message(route, routes.routes())}")
    return Inference(route=route, hosts=routes.hosts)


def route_table(args: argparse.Namespace) -> RouteTable:
    """The routes of the built-ins, ./pyproject.toml and the --plugins YAML, if the command has that option."""
    from ..adapters.route_table import RouteTable

    plugins = getattr(args, "plugins", None)
    return RouteTable.load(pyproject=Path("pyproject.toml"), plugins=Path(plugins) if plugins else None)


def config_inputs(args: argparse.Namespace) -> dict[str, list[Path]]:
    """The files :func:`route_table` reads, labelled for :func:`output_conflict`."""
    plugins = getattr(args, "plugins", None)
    return {"pyproject.toml, read for the routes": [Path("pyproject.toml")],
            "the --plugins file": [Path(plugins)] if plugins else []}


def output_conflict(output: Path, inputs: Mapping[str, Iterable[Path]], *, cassettes_too: bool = True) -> str | None:
    """Why writing ``output`` would destroy what the user keeps ("it is ..."), or ``None``.

    ``inputs`` maps a label ("one of the cassettes being read") to the files the
    command reads; the output is one of them when it is the same file once links
    are followed (``os.path.samefile``). With ``cassettes_too``, a golden
    (``*.chunks.jsonl``, even a new one: check and the plugin would read it as
    one) and an existing cassette, ours or plain vcrpy's, are refused too.
    """
    from ..cassette.files import cassette_kind
    from ..cassette.golden import GOLDEN_SUFFIX

    try:
        target = os.stat(output)  # through links, as atomic_write replaces the file a link points to
    except OSError:
        target = None  # no file yet: it cannot be one that is read
    if target is not None:
        for label, paths in inputs.items():
            for path in paths:
                try:
                    if os.path.samestat(target, os.stat(path)):
                        return f"it is {label}"
                except OSError:
                    continue
    if not cassettes_too:
        return None
    real = Path(os.path.realpath(output))
    if output.name.endswith(GOLDEN_SUFFIX) or real.name.endswith(GOLDEN_SUFFIX):
        return "it is a golden" if target is not None else f"a {GOLDEN_SUFFIX} file is read as a golden"
    kind = cassette_kind(real)
    if kind == "unreadable":
        return "it cannot be read to tell whether it is a cassette"
    return f"it is a {kind} cassette" if kind is not None else None


def refuse_output(output: Path, *, what: str, inputs: Mapping[str, Iterable[Path]], force: bool) -> None:
    """Raise ``ConfigError`` when ``output`` has an :func:`output_conflict`, unless ``force``.

    Asked before the work: a long replay should not end in a refusal.
    """
    from ..errors import ConfigError

    if force:
        return
    reason = output_conflict(output, inputs)
    if reason is not None:
        raise ConfigError(f"refusing to write {what} to {output}: {reason} (use --force to overwrite)")


def clean_stale_temp_files(paths: Iterable[Path], *, older_than: float) -> list[Path]:
    """Remove what killed writes left where this run writes: under each folder, and beside each file, of ``paths``.

    Beside a file only (not under its folder): ``record --out hello.yaml`` must
    not walk the whole project. ``older_than``: the start of this run.
    """
    from ..cassette.files import remove_stale_temp_files

    removed: list[Path] = []
    for path in paths:
        if path.is_dir():
            removed += remove_stale_temp_files(path, older_than=older_than)
        else:
            removed += remove_stale_temp_files(path.parent, older_than=older_than, recursive=False)
    return removed
