"""The ``dsh_replay:`` key of a cassette the recording proxy wrote: its route, and its calls as options.

The proxy sees requests, not :class:`GenerateOptions`: the options are read
back from each recorded request with the route's reverse request mapping,
as ``dsh-replay import`` reads them (:func:`~dsh_replay.cassette.import_requests.map_request`,
checked by building the request again with the route's adapter). A request
sent again unchanged is a retry (a 429, then the same request once more), not
a new call. When a request cannot be read back (a route without a reverse
mapping, a field the adapter would not send), the cassette keeps its raw
requests only, and the reason is returned for the log: such a cassette
replays through ``serve`` and ``use_cassette``, but ``check`` cannot run it
without a test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._version import __version__
from ..adapters.route_table import RouteTable
from ..cassette.import_requests import map_request
from ..cassette.store import FORMAT_VERSION, Interaction
from ..errors import DshReplayError
from ..protocol.options import GenerateOptions

__all__ = ["recorded_metadata"]


def recorded_metadata(
    route: str | None, interactions: Sequence[Interaction], routes: RouteTable | None,
) -> tuple[dict[str, Any], str]:
    """The metadata, and why it has no options ("" when it has them)."""
    metadata: dict[str, Any] = {"format": FORMAT_VERSION}
    why = "no route is known (give --route, or an --upstream per route)"
    calls: list[GenerateOptions] = []
    base_url = None
    if route is not None:
        metadata["route"] = route
        why = "" if routes is not None else "the routes are not loaded"
    if route is not None and routes is not None:
        try:
            for position, interaction in enumerate(interactions):
                if position and interaction.request.body == interactions[position - 1].request.body:
                    continue  # a retry of the same call
                mapped = map_request(routes, route, interaction.request)
                calls.append(mapped.options)
                base_url = base_url or mapped.base_url
        except DshReplayError as exc:  # NotImportable, mostly: a request the mapping cannot read back
            calls, why = [], f"request {position} cannot be read back as options: {exc}"
    if calls:
        metadata["options"] = calls[0].to_json()
        if len(calls) > 1:
            metadata["follow_ups"] = [call.to_json() for call in calls[1:]]
        metadata["base_url"] = base_url
    metadata["library"] = f"dsh-replay {__version__}"
    return metadata, why
