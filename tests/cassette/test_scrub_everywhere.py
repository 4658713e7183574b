"""Every way a request carries a credential is scrubbed, and every place it comes back is masked.

Recorded through a real loopback provider: URL userinfo, every credential query
parameter, any ``*-api-key`` / ``*-token`` / ``*-secret`` header, JSON body
fields, and the key a provider's 401 quotes back (in the body, a header, a
recorded failure's message), with the fragmentation kept around the mask.
``dsh-replay scan`` finds each of them in a cassette that was never scrubbed.
"""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from dsh_replay import use_cassette
from dsh_replay.cassette.scrub import REDACTED, Scrubber, mask_echoes_in_body
from dsh_replay.cassette.secrets import find_secrets
from dsh_replay.cassette.store import Cassette
from dsh_replay.cli.scan import run_scan
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

KEY = "sk-test-" + "Zq7Rb3Nd8Lk2Wp5Xs9Jf4Hc6"
SECRET = "Zq7" + "Rb3Nd8Lk2Wp5Xs9Jf4Hc6Mv1"  # no known shape: found by where it is
SSE = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
PATH = "/v1/chat/completions"


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def _recorded(path: Path) -> tuple[str, Cassette]:
    text = path.read_text()
    return text, Cassette.load(path)


def _scan(*paths: Path) -> tuple[int, str]:
    out = io.StringIO()
    code = run_scan([str(p) for p in paths], out)
    return code, out.getvalue()


# -- the request -------------------------------------------------------------------


def test_url_userinfo_is_scrubbed_and_still_matches(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse.streaming(SSE))
    path = tmp_path / "userinfo.yaml"
    url = emu.url(PATH).replace("http://", f"http://user:{SECRET}@")
    with use_cassette(path, "once") as session, httpx.Client() as client:
        assert client.post(url, json={"m": 1}).content == SSE
    text, cassette = _recorded(path)
    assert SECRET not in text
    assert f"user:{REDACTED}@" in cassette.interactions[0].request.uri
    assert session.scrubbed == 2  # the userinfo, and the Basic header httpx made of it
    with use_cassette(path) as replay, httpx.Client() as client:
        assert client.post(url.replace(SECRET, "another-password-1234"), json={"m": 1}).content == SSE
    assert replay.played == 1


@pytest.mark.parametrize(
    "name",
    ["key", "api_key", "apikey", "api-key", "access_token", "token", "client_secret", "sig", "signature",
     "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "subscription-key", "auth_token"],
)
def test_every_credential_query_parameter_is_scrubbed(emu: ProviderEmulator, tmp_path: Path, name: str) -> None:
    emu.add("GET", "/v1/models", ScriptedResponse.json({"data": []}))
    path = tmp_path / "query.yaml"
    with use_cassette(path, "once") as session, httpx.Client() as client:
        client.get(emu.url("/v1/models"), params={name: SECRET, "page": "2"})
    text, cassette = _recorded(path)
    assert SECRET not in text
    assert cassette.interactions[0].request.query == sorted([(name, REDACTED), ("page", "2")])
    assert session.scrubbed == 1


@pytest.mark.parametrize(
    "name", ["x-amz-security-token", "x-auth-token", "x-portkey-api-key", "x-client-secret", "X-Custom-Api-Key",
             "Ocp-Apim-Subscription-Key", "x-functions-key", "x-apikey"]
)
def test_any_api_key_token_or_secret_header_is_scrubbed(emu: ProviderEmulator, tmp_path: Path, name: str) -> None:
    emu.add("POST", PATH, ScriptedResponse.streaming(SSE))
    path = tmp_path / "headers.yaml"
    harmless = {"anthropic-version": "2023-06-01", "x-ratelimit-limit-tokens": "40000-token",
                "idempotency-key": "retry-of-call-000123"}
    with use_cassette(path, "once"), httpx.Client() as client:
        client.post(emu.url(PATH), json={}, headers={name: SECRET, **harmless})
    text, cassette = _recorded(path)
    assert SECRET not in text
    headers = cassette.interactions[0].request.headers
    assert headers[name] == REDACTED
    assert {k: headers[k] for k in harmless} == harmless  # the allow-list keeps what carries no secret


def test_response_credential_headers_are_scrubbed(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse.streaming(SSE, headers={"x-api-key": SECRET, "x-session-token": SECRET,
                                                                   "x-ratelimit-remaining-tokens": "39000"}))
    path = tmp_path / "response-headers.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        client.post(emu.url(PATH), json={})
    text, cassette = _recorded(path)
    assert SECRET not in text
    headers = dict(cassette.interactions[0].headers)
    assert headers["x-api-key"] == headers["x-session-token"] == REDACTED
    assert headers["x-ratelimit-remaining-tokens"] == "39000"


@pytest.mark.parametrize("field", ["api_key", "apiKey", "access_token", "password", "client_secret", "token",
                                   "openai_api_key", "openaiApiKey", "session_token", "webhook_secret"])
def test_json_body_credential_fields_are_scrubbed_at_any_depth(emu: ProviderEmulator, tmp_path: Path, field: str) -> None:
    emu.add("POST", PATH, ScriptedResponse.streaming(SSE))
    path = tmp_path / "body.yaml"
    body = {"model": "m", "auth": {field: SECRET}, "messages": [{"role": "user", "content": "hi"}]}
    with use_cassette(path, "once"), httpx.Client() as client:
        client.post(emu.url(PATH), json=body)
    text, cassette = _recorded(path)
    assert SECRET not in text
    recorded = json.loads(cassette.interactions[0].request.body)
    assert recorded == {**body, "auth": {field: REDACTED}}
    # another key in the same field still matches the recording
    with use_cassette(path) as replay, httpx.Client() as client:
        client.post(emu.url(PATH), json={**body, "auth": {field: "another-secret-5678"}})
    assert replay.played == 1


@pytest.mark.parametrize("field", ["api_key", "apiKey", "auth_token", "key"])
def test_form_body_credential_fields_are_scrubbed(emu: ProviderEmulator, tmp_path: Path, field: str) -> None:
    emu.add("POST", PATH, ScriptedResponse.streaming(SSE))
    path = tmp_path / "form.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        client.post(emu.url(PATH), data={"model": "m", field: SECRET, "max_tokens": "5"})
    text, cassette = _recorded(path)
    assert SECRET not in text
    assert cassette.interactions[0].request.body == f"model=m&{field}={REDACTED}&max_tokens=5".encode()
    with use_cassette(path) as replay, httpx.Client() as client:  # another key still matches
        client.post(emu.url(PATH), data={"model": "m", field: "another-secret-5678", "max_tokens": "5"})
    assert replay.played == 1


def test_a_body_that_only_looks_like_a_form_is_left_as_it_is() -> None:
    scrubber = Scrubber()
    for body in (b"the token= is not a form, it has spaces", b'{"max_tokens": 5, "token_budget": 9}',
                 b"max_tokens=5&stream=true"):
        assert scrubber.request("https://api.test/v1", [], body).body == body


# -- what comes back ---------------------------------------------------------------


def test_a_key_quoted_by_a_401_is_masked_in_the_body(emu: ProviderEmulator, tmp_path: Path) -> None:
    quoted = json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}. Check it."}}).encode()
    emu.add("POST", PATH, ScriptedResponse(status=401, fragments=[quoted]))
    path = tmp_path / "echo-401.yaml"
    with use_cassette(path, "once") as session, httpx.Client() as client:
        response = client.post(emu.url(PATH), json={}, headers={"authorization": f"Bearer {SECRET}"})
    assert response.status_code == 401 and SECRET.encode() in response.content  # the caller saw it live
    text, cassette = _recorded(path)
    assert SECRET not in text
    assert cassette.interactions[0].body == quoted.replace(SECRET.encode(), REDACTED.encode())
    assert session.scrubbed == 2  # the header, and the echo
    assert _scan(path)[0] == 0


def test_a_scrubbed_query_value_quoted_back_percent_encoded_is_masked(emu: ProviderEmulator, tmp_path: Path) -> None:
    sig = "sv/Zq7+Rb3Nd8Lk2Wp5Xs9Jf4Hc6=="  # a SAS signature: '/', '+' and '=' travel escaped
    escaped = "sv%2FZq7%2BRb3Nd8Lk2Wp5Xs9Jf4Hc6%3D%3D"
    body = json.dumps({"error": {"message": f"expired: https://blob.test/c?sig={escaped}"}}).encode()
    emu.add("GET", "/c", ScriptedResponse(status=403, fragments=[body],
                                          headers={"location": f"https://blob.test/c?sig={escaped}"}))
    path = tmp_path / "sas.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        client.get(emu.url("/c"), params={"sig": sig})
    text, cassette = _recorded(path)
    assert escaped not in text and sig not in text
    assert dict(cassette.interactions[0].headers)["location"] == f"https://blob.test/c?sig={REDACTED}"
    assert cassette.interactions[0].body == body.replace(escaped.encode(), REDACTED.encode())


def test_an_echo_in_a_header_and_across_fragments_keeps_the_fragmentation(emu: ProviderEmulator, tmp_path: Path) -> None:
    before, after = b'data: {"debug":"key ', b'"}\n\ndata: [DONE]\n\n'
    key = KEY.encode()
    # the key arrives split over two fragments, between two fragments of its own
    pieces = [before, key[:10], key[10:], after]
    emu.add("POST", PATH, ScriptedResponse(fragments=pieces, headers={"x-echo": f"seen {KEY}",
                                                                     "content-type": "text/event-stream"}, delay=0.01))
    path = tmp_path / "echo-split.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        client.post(emu.url(PATH), json={}, headers={"x-api-key": KEY})
    text, cassette = _recorded(path)
    assert KEY not in text
    interaction = cassette.interactions[0]
    assert interaction.body == before + REDACTED.encode() + after
    assert dict(interaction.headers)["x-echo"] == f"seen {REDACTED}"
    assert interaction.fragment_sizes() == [len(before), len(REDACTED), len(after)]


def test_a_key_quoted_in_a_recorded_failure_is_masked(tmp_path: Path) -> None:
    from dsh_replay.cassette.interaction import RecordedError
    from dsh_replay.cassette.scrub import mask_interaction_echoes
    from dsh_replay.cassette.store import Interaction

    body = b"abc " + KEY.encode() + b" def"
    interaction = Interaction(request=None, status=200, reason="OK", headers=[], body=body,
                              fragments=[(1.0, 4), (2.0, len(KEY)), (3.0, 4)],
                              error=RecordedError("ReadError", f"reset after {KEY}", len(body), 4.0))
    assert mask_interaction_echoes(interaction, (KEY,)) == 2
    assert interaction.body == b"abc REDACTED def"
    assert interaction.fragments == [(1.0, 4), (2.0, 8), (3.0, 4)]
    assert interaction.error == RecordedError("ReadError", "reset after REDACTED", len(interaction.body), 4.0)


def test_mask_moves_offsets_with_the_bytes() -> None:
    body, moved = mask_echoes_in_body(b"0123 key " + KEY.encode() + b" end", [KEY], [5, 10, 41, 42, 45])
    assert body == b"0123 key REDACTED end"
    assert moved == [5, 17, 17, 18, 21]


def test_removed_values_include_the_token_of_a_scheme() -> None:
    scrubbed = Scrubber().request("https://h/v1", [("authorization", f"Bearer {KEY}"), ("cookie", "sid=abcdefgh12345678; x=1")], b"")
    assert KEY in scrubbed.removed and f"Bearer {KEY}" in scrubbed.removed and "abcdefgh12345678" in scrubbed.removed
    assert "x" not in scrubbed.removed and "Bearer" not in scrubbed.removed  # too short to mask elsewhere


# -- the scan ----------------------------------------------------------------------


def _unscrubbed_cassette(path: Path, *, uri: str = "https://api.example.com/v1/chat",
                         request_headers: dict[str, list[str]] | None = None, body: str = "{}",
                         response_headers: dict[str, list[str]] | None = None, response: str = "ok") -> Path:
    data = {
        "version": 1,
        "interactions": [{
            "request": {"method": "POST", "uri": uri, "body": body, "headers": request_headers or {}},
            "response": {"status": {"code": 200, "message": "OK"}, "headers": response_headers or {},
                         "body": {"string": response}},
        }],
    }
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("kwargs", "kind"),
    [
        ({"uri": f"https://user:{SECRET}@api.example.com/v1"}, "URL userinfo credential"),
        ({"uri": f"https://api.example.com/v1?apikey={SECRET}"}, "credential query parameter 'apikey'"),
        ({"uri": f"https://api.example.com/v1?api-key={SECRET}"}, "credential query parameter 'api-key'"),
        ({"uri": f"https://api.example.com/v1?access_token={SECRET}"}, "credential query parameter 'access_token'"),
        ({"uri": f"https://s.blob.example/c?sv=1&sig={SECRET}"}, "credential query parameter 'sig'"),
        ({"uri": f"https://b.s3.example/k?X-Amz-Security-Token={SECRET}"}, "credential query parameter 'X-Amz-Security-Token'"),
        ({"request_headers": {"x-amz-security-token": [SECRET]}}, "credential header"),
        ({"request_headers": {"x-auth-token": [SECRET]}}, "credential header"),
        ({"request_headers": {"x-portkey-api-key": [SECRET]}}, "credential header"),
        ({"response_headers": {"x-api-key": [SECRET]}}, "credential header"),
        ({"body": json.dumps({"api_key": SECRET})}, "credential field"),
        ({"body": json.dumps({"gateway": {"apiKey": SECRET}})}, "credential field"),
        ({"body": json.dumps({"password": SECRET})}, "credential field"),
        ({"response": json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}"}})},
         "API key quoted in an error"),
        ({"uri": f"https://apim.example.net/v1?subscription-key={SECRET}"},
         "credential query parameter 'subscription-key'"),
        ({"request_headers": {"Ocp-Apim-Subscription-Key": [SECRET]}}, "credential header"),
        ({"request_headers": {"x-apikey": [SECRET]}}, "credential header"),
        ({"body": json.dumps({"openai_api_key": SECRET})}, "credential field"),
        ({"body": json.dumps({"token": SECRET})}, "credential field"),
        ({"body": f"model=m&api_key={SECRET}"}, "credential field"),
        ({"body": f"model=m&key={SECRET}&stream=true"}, "credential field"),
    ],
    ids=["userinfo", "apikey", "api-key", "access_token", "sig", "x-amz", "h-amz", "h-auth-token", "h-portkey",
         "resp-x-api-key", "body-api_key", "body-apiKey-nested", "body-password", "echo-401", "subscription-key",
         "h-apim", "h-x-apikey", "body-openai_api_key", "body-token", "form-api_key", "form-key"],
)
def test_scan_finds_a_credential_by_where_it_is(tmp_path: Path, kwargs: dict[str, object], kind: str) -> None:
    path = _unscrubbed_cassette(tmp_path / "leaky.yaml", **kwargs)  # type: ignore[arg-type]
    code, out = _scan(path)
    assert code == 1
    assert f"{kind} in " in out
    assert SECRET not in out  # masked excerpts only
    # the same cassette written through the cassette engine is refused
    assert [hit.kind for hit in find_secrets(yaml.safe_load(path.read_text()))] == [kind]


def test_scan_reads_a_raw_deflate_body_that_has_no_header_to_tell_it_by(tmp_path: Path) -> None:
    squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    body = squeeze.compress(f"Incorrect API key provided: {KEY}".encode()) + squeeze.flush()
    path = _unscrubbed_cassette(tmp_path / "deflated.yaml", response=body)  # type: ignore[arg-type]
    assert "!!binary" in path.read_text()
    code, out = _scan(path)
    assert code == 1
    assert "OpenAI API key in interactions[0].response.body.string (decompressed raw deflate)" in out


def test_scan_leaves_scrubbed_and_harmless_values_alone(tmp_path: Path) -> None:
    path = _unscrubbed_cassette(
        tmp_path / "clean.yaml",
        uri=f"https://user:{REDACTED}@api.example.com/v1?key={REDACTED}&alt=sse&page=2",
        request_headers={"authorization": [REDACTED], "anthropic-version": ["2023-06-01"], "x-auth-token": [REDACTED],
                         "idempotency-key": ["retry-of-call-000123"]},
        response_headers={"x-ratelimit-remaining-tokens": ["39000"], "anthropic-ratelimit-tokens-reset": ["now"]},
        body=json.dumps({"model": "m", "api_key": REDACTED, "max_tokens": 5}),
        response="Incorrect API key provided: sk-test-********************1234",
    )
    assert _scan(path) == (0, "scanned 1 file(s): 0 secret(s) found\n")


SHAPES = [
    ("Groq API key", "gsk_" + "Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34"),
    ("xAI API key", "xai-" + "Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90"),
    ("Hugging Face token", "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"),
    ("GitHub token", "ghp_" + "Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78"),
    ("GitHub token", "github_pat_" + "11AB12CD34EF56GH78IJ90_kl12mn34op56qr78st90uv"),
    ("Slack token", "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKl"),
    ("Stripe-style secret key", "sk_live_" + "Ab12Cd34Ef56Gh78Ij90Kl12"),
    ("AWS access key id", "AKIA" + "Q3EXAMPLE7KEY2ID"),
]


@pytest.mark.parametrize(("kind", "secret"), SHAPES, ids=[f"{k}-{n}" for n, (k, _) in enumerate(SHAPES)])
def test_scan_knows_more_key_shapes(tmp_path: Path, kind: str, secret: str) -> None:
    path = _unscrubbed_cassette(tmp_path / "shape.yaml", response=f"here: {secret} done")
    code, out = _scan(path)
    assert code == 1
    assert f"{kind} in interactions[0].response.body.string" in out
    assert secret not in out


def test_header_decisions_follow_each_scrubbers_own_names_even_given_as_a_plain_set() -> None:
    plain = Scrubber()
    custom = Scrubber(request_headers={"x-house-pass"})  # a set, not a frozenset
    headers = [("X-House-Pass", KEY), ("Authorization", f"Bearer {KEY}"), ("Accept", "text/event-stream")]
    for _ in range(2):  # the second time from what was remembered
        assert [v for _, v in custom.request("https://api.test/v1", headers, b"{}").headers] == [
            REDACTED, f"Bearer {KEY}", "text/event-stream"]
        assert [v for _, v in plain.request("https://api.test/v1", headers, b"{}").headers] == [
            KEY, REDACTED, "text/event-stream"]


@pytest.mark.parametrize(("uri", "scrubbed"), [
    ("https://api.test/v1/chat", "https://api.test/v1/chat"),
    (f"https://api.test/v1/chat?key={KEY}", f"https://api.test/v1/chat?key={REDACTED}"),
    (f"https://user:{KEY}@api.test/v1/chat", f"https://user:{REDACTED}@api.test/v1/chat"),
])
def test_a_uri_without_query_or_user_info_is_kept_as_it_is_and_the_others_scrubbed(uri: str, scrubbed: str) -> None:
    assert Scrubber().request(uri, [], b"").uri == scrubbed
