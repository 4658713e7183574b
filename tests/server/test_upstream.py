"""Where the recording proxy sends a request: the upstream of its route, https only, never the client's host."""

from __future__ import annotations

import pytest

from dsh_replay.errors import ConfigError
from dsh_replay.server.upstream import PUBLIC_UPSTREAMS, Upstreams, forwarded_headers, upstream_url


def test_one_upstream_takes_every_request_and_the_name_s_route_is_kept() -> None:
    upstreams = Upstreams.parse(["https://api.openai.com/"])
    assert upstreams.pick("anthropic/text", []) == ("anthropic", "https://api.openai.com")
    assert upstreams.pick("mine/text", []) == (None, "https://api.openai.com")


def test_a_route_picks_its_upstream_else_its_provider_s_public_url() -> None:
    upstreams = Upstreams.parse(["openai=https://gateway.example.test/openai", "mine=https://mine.example.test"])
    assert upstreams.pick("openai/text", []) == ("openai", "https://gateway.example.test/openai")
    assert upstreams.pick("text", [("X-Dsh-Replay-Route", "mine")]) == ("mine", "https://mine.example.test")
    assert upstreams.pick("anthropic/text", []) == ("anthropic", PUBLIC_UPSTREAMS["anthropic"])
    with pytest.raises(ConfigError, match="names no route"):
        upstreams.pick("text", [])
    with pytest.raises(ConfigError, match="'nobody' has no upstream; routes: anthropic, deepseek"):
        upstreams.pick("text", [("x-dsh-replay-route", "nobody")])


@pytest.mark.parametrize(("values", "message"), [
    (["http://api.openai.com"], "is not https://"),
    (["https://user:sk-test-0123456789abcdef@api.example.test"], "a credential in the URL"),
    (["ftp://files.example.test"], "is not an http"),
    (["https://a.example.test", "https://b.example.test"], "a second upstream for every request"),
    (["openai=https://a.example.test", "openai=https://b.example.test"], "route 'openai' has two upstreams"),
    (["https://a.example.test/v1?key=x"], "a query or fragment"),
])
def test_a_bad_upstream_is_refused_at_start(values: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Upstreams.parse(values)


def test_http_needs_allow_insecure_upstream_and_the_ollama_default_too() -> None:
    assert Upstreams.parse(["http://127.0.0.1:9"], insecure=True).default == "http://127.0.0.1:9"
    with pytest.raises(ConfigError, match="--allow-insecure-upstream"):
        Upstreams.parse([]).pick("ollama/chat", [])


def test_the_client_s_headers_go_upstream_less_hop_by_hop_ours_and_its_compression() -> None:
    sent = [("Host", "127.0.0.1:8765"), ("Authorization", "Bearer sk-test-0123456789abcdef"),
            ("Connection", "keep-alive"), ("Content-Length", "12"), ("Accept-Encoding", "gzip, br"),
            ("x-dsh-replay-cassette", "openai/text"), ("x-dsh-replay-route", "openai"), ("user-agent", "node")]
    assert forwarded_headers(sent) == [("Authorization", "Bearer sk-test-0123456789abcdef"), ("user-agent", "node"),
                                       ("accept-encoding", "identity")]
    assert upstream_url("https://api.openai.com", "/v1/chat/completions", "a=1") == \
        "https://api.openai.com/v1/chat/completions?a=1"
