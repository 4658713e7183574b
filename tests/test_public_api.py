from __future__ import annotations

from types import ModuleType

import dsh_replay


def test_all_is_sorted_and_unique() -> None:
    assert list(dsh_replay.__all__) == sorted(set(dsh_replay.__all__))


def test_all_is_complete() -> None:
    # names are resolved on first use: what the package offers is its table of lazy names
    offered = {
        name for name in dir(dsh_replay)
        if name.isidentifier() and not name.startswith("_") and not isinstance(getattr(dsh_replay, name), ModuleType)
    }
    offered -= {"annotations", "Any", "TYPE_CHECKING"}
    assert offered == set(dsh_replay.__all__)
    assert set(dsh_replay._EXPORTS) == set(dsh_replay.__all__)


def test_every_name_resolves() -> None:
    for name in dsh_replay.__all__:
        assert getattr(dsh_replay, name) is not None, name


def test_exception_tree() -> None:
    root = dsh_replay.DshReplayError
    for name in ("ProtocolViolation", "ConfigError", "CassetteError", "ProviderError"):
        assert issubclass(getattr(dsh_replay, name), root)
    for name in (
        "AuthenticationError", "RateLimitError", "OverloadedError", "InvalidRequestError",
        "ServerError", "StreamInterruptedError", "StreamTimeoutError", "MalformedStreamError",
    ):
        assert issubclass(getattr(dsh_replay, name), dsh_replay.ProviderError), name


def test_provider_error_carries_structured_facts() -> None:
    error = dsh_replay.RateLimitError("slow down", route="openai", status=429, provider_code="rate_limit_exceeded", request_id="req_1", retry_after=3.0)
    assert (error.route, error.status, error.provider_code, error.request_id, error.retry_after) == (
        "openai", 429, "rate_limit_exceeded", "req_1", 3.0,
    )
    assert str(error) == "slow down (route=openai, status=429, code=rate_limit_exceeded, request_id=req_1)"
