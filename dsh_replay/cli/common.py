"""What several commands share: argument types and the route table.

Kept light on purpose: ``main`` imports it for every command, including
``--help``, which must not pay for the adapters or the cassette engine.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..adapters.route_table import RouteTable

__all__ = ["FRAGMENTATION_HELP", "PLUGINS_HELP", "add_plugins", "fragmentation_type", "route_table"]

FRAGMENTATION_HELP = "how bodies are cut into fragments: recorded, single, bytes, random[:SEED]"
PLUGINS_HELP = "a plugin YAML (cordis.yml shape) whose plugins register more routes"


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


def route_table(args: argparse.Namespace) -> RouteTable:
    """The routes of the built-ins, ./pyproject.toml and the --plugins YAML, if the command has that option."""
    from ..adapters.route_table import RouteTable

    plugins = getattr(args, "plugins", None)
    return RouteTable.load(pyproject=Path("pyproject.toml"), plugins=Path(plugins) if plugins else None)
