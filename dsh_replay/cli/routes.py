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
    if table.hosts:  # which route a recorded call to each of them is read as (import, --route-less check)
        out.write("\nhosts ([tool.dsh_replay.hosts] in pyproject.toml):\n")
        width = max(len(host) for host in table.hosts)
        for host, route in sorted(table.hosts.items()):
            out.write(f"{host.ljust(width)}  {route}\n")
    return 0


DESCRIPTION = (
    "List every route: the built-in adapters, [tool.dsh_replay.routes] in ./pyproject.toml, and\n"
    "the routes a plugin YAML registers; then the hosts [tool.dsh_replay.hosts] maps to routes."
)
EXAMPLE = "dsh-replay routes --plugins dsh.yml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_routes(out, route_table(args))
