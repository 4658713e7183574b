"""acme-adapter: the Acme streaming API for the dsh harness, as a plugin.

The four plugin exports — ``name``, ``Config``, ``inject``, ``apply`` — are what
``dsh_replay.load_plugins`` reads from ``dsh.yml``; the adapter class is also
importable on its own (``[tool.dsh_replay.routes] acme = "acme_adapter:AcmeAdapter"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsh_replay import PluginContext

from .adapter import AcmeAdapter

__all__ = ["AcmeAdapter", "Config", "apply", "inject", "name"]

name = "acme"

# the llm registry must be ready before apply runs
inject = ["llm"]


@dataclass(frozen=True)
class Config:
    """``apiKey`` and ``providers`` are required; ``baseUrl`` points at a proxy or a test server."""

    api_key: str
    providers: list[str]
    base_url: str = "https://api.acme.example"


def apply(ctx: PluginContext, config: Config) -> None:
    ctx.llm.register_adapter(config.providers, AcmeAdapter(config.api_key, base_url=config.base_url))
