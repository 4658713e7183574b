"""``dsh-replay routes``: the routes known from the built-ins and configuration."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..adapters.route_table import RouteTable
from .common import add_plugins, route_table

__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "run", "run_routes"]


def run_routes(out: TextIO, table: RouteTable) -> int:
    width = max(len(r) for r in table.routes())
    for route in table.routes():
        out.write(f"{route.ljust(width)}  {table.sources.get(route, '')}\n")
    return 0


DESCRIPTION = (
    "List every route: the built-in adapters, [tool.dsh_replay.routes] in ./pyproject.toml, and\n"
    "the routes a plugin YAML registers."
)
EXAMPLE = "dsh-replay routes --plugins dsh.yml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_routes(out, route_table(args))
