"""``dsh-replay routes``: the routes known from the built-ins and configuration."""

from __future__ import annotations

from typing import TextIO

from ..adapters.route_table import RouteTable

__all__ = ["run_routes"]


def run_routes(out: TextIO, table: RouteTable) -> int:
    width = max(len(r) for r in table.routes())
    for route in table.routes():
        out.write(f"{route.ljust(width)}  {table.sources.get(route, '')}\n")
    return 0
