"""Secrets never reach disk: scrubbing on the way in, a scan before every write."""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError, Scrubber, use_cassette
from dsh_replay.cassette import content_coding
from dsh_replay.cassette.interaction import Interaction
from dsh_replay.cassette.scrub import DEFAULT_REQUEST_HEADERS
from dsh_replay.cassette.secrets import encoded_body_secrets, find_secrets, mask
from dsh_replay.cassette.store import Cassette
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

KEY = "sk-test-" + "Vb7Qx2Lm9Rt4Kp8Zs3Wd6Hj1"
OTHER_KEY = "sk-test-" + "Nc5Fy0Ge2Ua7Io4Pl9Mk3Bv8"
SSE = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
PATH = "/v1beta/models/gemini-2.0-flash:streamGenerateContent"


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def _post(client: httpx.Client, emu_url: str, key: str, **kwargs: object) -> httpx.Response:
    return client.post(
        f"{emu_url}?alt=sse&key={key}",
        headers={"authorization": f"Bearer {key}", "x-api-key": key, "x-goog-api-key": key},
        **kwargs,  # type: ignore[arg-type]
    )


# -- scrubbing -------------------------------------------------------------------------


def test_credentials_in_headers_and_query_never_reach_the_file(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse.streaming(SSE, headers={"set-cookie": "session=abc123; HttpOnly"}))
    path = tmp_path / "scrubbed.yaml"
    with use_cassette(path, "once") as session, httpx.Client() as client:
        response = _post(client, emu.url(PATH), KEY, json={"contents": []})
    assert response.content == SSE
    assert emu.requests[0].headers["x-goog-api-key"] == KEY  # the server did get the real key
    text = path.read_text()
    assert KEY not in text
    assert "abc123" not in text
    assert session.scrubbed == 5  # authorization, x-api-key, x-goog-api-key, ?key=, set-cookie
    interaction = Cassette.load(path).interactions[0]
    assert interaction.request.query == [("alt", "sse"), ("key", "REDACTED")]
    for name in ("authorization", "x-api-key", "x-goog-api-key"):
        assert interaction.request.headers[name] == "REDACTED"
    assert ("set-cookie", "REDACTED") in interaction.headers

    # a replay with another key still matches: the query is compared scrubbed
    with use_cassette(path) as replay, httpx.Client() as client:
        assert _post(client, emu.url(PATH), OTHER_KEY, json={"contents": []}).content == SSE
    assert replay.played == 1 and replay.scrubbed == 0
    assert len(emu.requests) == 1


def test_more_names_can_be_scrubbed(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("GET", "/v1/models", ScriptedResponse.json({"data": []}))
    path = tmp_path / "custom.yaml"
    scrubber = Scrubber(request_headers=DEFAULT_REQUEST_HEADERS | {"x-portkey-api-key"},
                        query_parameters=frozenset({"token"}))
    with use_cassette(path, "once", scrubber=scrubber) as session, httpx.Client() as client:
        client.get(emu.url("/v1/models?token=abc&page=2"), headers={"x-portkey-api-key": "pk-secret-value"})
    text = path.read_text()
    assert "pk-secret-value" not in text and "token=abc" not in text
    assert "token=REDACTED&page=2" in text
    assert session.scrubbed == 2


@pytest.mark.parametrize(
    ("where", "field"),
    [("body", "response.body.string"), ("header", "response.headers.x-echo")],
)
def test_a_key_the_request_did_not_carry_refuses_the_write_and_leaves_no_file(
    emu: ProviderEmulator, tmp_path: Path, where: str, field: str
) -> None:
    # the request's own key would be masked where it comes back; another one is refused
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {OTHER_KEY}"}}).encode()
    if where == "body":
        emu.add("POST", PATH, ScriptedResponse.streaming(SSE), ScriptedResponse(status=401, fragments=[echo]))
    else:
        emu.add("POST", PATH, ScriptedResponse.streaming(SSE),
                ScriptedResponse.streaming(SSE, headers={"x-echo": f"Bearer {OTHER_KEY}"}))
    path = tmp_path / "leaky.yaml"
    with pytest.raises(CassetteError) as caught, use_cassette(path, "once"), httpx.Client() as client:
        _post(client, emu.url(PATH), KEY, json={})
        _post(client, emu.url(PATH), KEY, json={})
    message = str(caught.value)
    assert str(path) in message
    assert "interaction 1" in message
    assert f"field {field}" in message
    assert OTHER_KEY not in message  # the error shows a masked excerpt only
    assert caught.value.path == str(path)
    assert list(tmp_path.iterdir()) == []  # no cassette, no temp file


GOOGLE_KEY = "AIza" + "SyD3f8Kq1Lm2Np3Or4St5Uv6Wx7Yz8Ab9Cd"


def _gzip_echo() -> ScriptedResponse:
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    return ScriptedResponse(status=401, headers={"content-encoding": "gzip"}, fragments=[gzip.compress(echo)])


def _raw_deflate_echo() -> ScriptedResponse:
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)  # no zlib header: nothing to tell it by
    return ScriptedResponse(status=401, headers={"content-encoding": "deflate"},
                            fragments=[squeeze.compress(echo) + squeeze.flush()])


@pytest.mark.parametrize(
    ("response", "found"),
    [
        (_gzip_echo(), "OpenAI API key found in interaction 0, field response.body.string (decompressed gzip)"),
        (_raw_deflate_echo(), "OpenAI API key found in interaction 0, field response.body.string (decompressed raw deflate)"),
        (ScriptedResponse(status=302, headers={"location": f"/v1/next?x=1&token=%3D{GOOGLE_KEY}"}),
         "Google API key found in interaction 0, field response.headers.location[0]"),
        (ScriptedResponse.streaming(SSE, headers={"x-proxy-auth": "bearer abc123def456ghi789jkl"}),
         "bearer token found in interaction 0, field response.headers.x-proxy-auth[0]"),
    ],
    ids=["gzip-body", "raw-deflate-body", "percent-encoded-location", "lowercase-bearer"],
)
def test_a_key_the_raw_text_hides_still_refuses_the_write(
    emu: ProviderEmulator, tmp_path: Path, response: ScriptedResponse, found: str
) -> None:
    emu.add("POST", PATH, response)
    path = tmp_path / "hidden.yaml"
    with pytest.raises(CassetteError) as caught, use_cassette(path, "once"), httpx.Client() as client:
        _post(client, emu.url(PATH), KEY, json={})
    assert f"{found} (" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_compressed_echo_is_refused_with_the_way_to_record_it_uncompressed(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", PATH, _raw_deflate_echo())
    with pytest.raises(CassetteError) as caught, use_cassette(tmp_path / "c.yaml", "once"), httpx.Client() as client:
        _post(client, emu.url(PATH), KEY, json={})
    assert "Accept-Encoding: identity" in str(caught.value)
    assert KEY not in str(caught.value)


def _coded(body: bytes, coding: str) -> Interaction:
    request = VcrRequest("POST", "https://api.test/v1/chat/completions", b"{}", {})
    return Interaction(request=request, status=401, reason="Unauthorized",
                       headers=[("content-encoding", coding)], body=body)


def test_a_body_in_a_coding_no_installed_module_decodes_cannot_be_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(content_coding._DECODERS, "br", lambda: None)  # as where neither brotli module is
    hits = list(encoded_body_secrets(_coded(b"\x1b\x2a\x00", "br")))
    assert [(hit.kind, hit.field) for hit in hits] == [("a body that cannot be scanned", "response.body (decoded br)")]
    assert "install brotli or brotlicffi" in hits[0].excerpt
    unknown = list(encoded_body_secrets(_coded(b"...", "x-house-coding")))
    assert [hit.kind for hit in unknown] == ["a body that cannot be scanned"]
    assert list(encoded_body_secrets(_coded(b"plain", "identity"))) == []


def test_a_brotli_or_zstd_body_is_read_with_the_installed_module(monkeypatch: pytest.MonkeyPatch) -> None:
    echo = f"Incorrect API key provided: {KEY}".encode()
    for coding in ("br", "zstd"):  # stand-ins for the modules: the bytes reversed are the "compressed" form
        monkeypatch.setitem(content_coding._DECODERS, coding, lambda: lambda body: body[::-1])
        hits = list(encoded_body_secrets(_coded(echo[::-1], coding)))
        assert [(hit.kind, hit.field) for hit in hits] == [("OpenAI API key", f"response.body (decoded {coding})")]
    # gzip inside br, as "Content-Encoding: gzip, br" says: undone last-applied first
    hits = list(encoded_body_secrets(_coded(gzip.compress(echo)[::-1], "gzip, br")))
    assert [hit.field for hit in hits] == ["response.body (decoded gzip, br)"]


def test_a_gzip_body_without_a_key_is_written(emu: ProviderEmulator, tmp_path: Path) -> None:
    body = gzip.compress(b'{"error":{"message":"Incorrect API key provided: sk-test-***"}}')
    emu.add("POST", PATH, ScriptedResponse(status=401, headers={"content-encoding": "gzip"}, fragments=[body]))
    path = tmp_path / "clean-gzip.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        _post(client, emu.url(PATH), KEY, json={})
    assert Cassette.load(path).interactions[0].body == body


def test_a_refused_write_keeps_the_previous_cassette(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse.streaming(SSE), ScriptedResponse.streaming(OTHER_KEY.encode()))
    path = tmp_path / "kept.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        _post(client, emu.url(PATH), KEY, json={"n": 1})
    before = path.read_bytes()
    with pytest.raises(CassetteError, match="interaction 1"), use_cassette(path, "new_episodes"), httpx.Client() as client:
        _post(client, emu.url(PATH), KEY, json={"n": 2})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["kept.yaml"]


def test_body_filters_remove_what_only_the_user_knows_about(emu: ProviderEmulator, tmp_path: Path) -> None:
    echo = b'data: {"debug":"key=' + KEY.encode() + b'"}\n\ndata: [DONE]\n\n'
    emu.add("POST", PATH, ScriptedResponse.streaming(echo))

    def drop_key(part: str, body: bytes) -> bytes:
        return body.replace(KEY.encode(), b"REDACTED")

    path = tmp_path / "filtered.yaml"
    scrubber = Scrubber(body_filters=(drop_key,))
    request = {"contents": [{"parts": [{"text": f"my key is {KEY}"}]}]}
    with use_cassette(path, "once", scrubber=scrubber), httpx.Client() as client:
        live = _post(client, emu.url(PATH), KEY, json=request)
    assert live.content == echo  # the caller saw the real bytes
    text = path.read_text()
    assert KEY not in text
    interaction = Cassette.load(path).interactions[0]
    assert interaction.body == echo.replace(KEY.encode(), b"REDACTED")
    assert json.loads(interaction.request.body)["contents"][0]["parts"][0]["text"] == "my key is REDACTED"

    # the filter applies to replayed requests too, so they still match
    with use_cassette(path, scrubber=scrubber) as session, httpx.Client() as client:
        replayed = _post(client, emu.url(PATH), KEY, json=request)
    assert session.played == 1
    assert replayed.content == interaction.body


def test_a_key_in_the_request_body_is_caught_without_a_filter(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse.streaming(SSE))
    path = tmp_path / "request-body.yaml"
    # a credential field is scrubbed; a key pasted into a prompt is the scan's to catch
    with pytest.raises(CassetteError, match=r"interaction 0, field request\.body"), use_cassette(path, "once"):
        httpx.post(emu.url(PATH), json={"messages": [{"content": f"my key is {KEY}"}]})
    assert not path.exists()


# -- the scanner -----------------------------------------------------------------------

SHAPES = [
    ("OpenAI API key", "sk-" + "T3BlbkFJ" + "a1B2c3D4e5F6g7H8i9J0k1L2"),
    ("OpenAI API key", "sk-proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3_-Ab"),
    ("OpenAI API key", KEY),
    ("Anthropic API key", "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AAAA"),
    ("Google API key", "AIza" + "SyD3f8Kq1Lm2Np3Or4St5Uv6Wx7Yz8Ab9Cd"),
    ("AWS access key id", "AKIA" + "IOSFODNN7EXAMPLE"),
    ("bearer token", "Bearer " + "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"),
]


@pytest.mark.parametrize(("kind", "secret"), SHAPES, ids=[s[1][:8] for s in SHAPES])
def test_each_key_shape_is_found_once_with_its_kind_and_field(kind: str, secret: str) -> None:
    document = {"interactions": [{"response": {"body": {"string": f'data: {{"echo":"{secret}"}}\n\n'}}}]}
    hits = list(find_secrets(document))
    assert [(h.kind, h.field) for h in hits] == [(kind, "interactions[0].response.body.string")]
    assert secret not in hits[0].excerpt
    assert hits[0].excerpt == mask(secret)


@pytest.mark.parametrize(
    "value",
    [
        "REDACTED",
        "Bearer REDACTED",
        {"authorization": ["REDACTED"], "x-api-key": ["REDACTED"]},
        "https://generativelanguage.googleapis.com/v1beta/models?alt=sse&key=REDACTED",
        b"data: REDACTED\n\n",
    ],
)
def test_redacted_never_matches(value: object) -> None:
    assert list(find_secrets(value)) == []


@pytest.mark.parametrize(
    "value",
    [
        "task-force-the-quick-brown-fox",  # "sk-" inside a word
        "sk-short",
        "chatcmpl-9xAbCdEfGhIjKlMnOpQrStUv",
        "msg_01XFDUDYJgAACzvnptvVoYEL",
        "Bearer short",
        "AKIA-not-a-key",
    ],
)
def test_ordinary_provider_strings_are_not_secrets(value: str) -> None:
    assert list(find_secrets(value)) == []


def test_bytes_and_keys_are_scanned() -> None:
    assert [h.field for h in find_secrets({"headers": {KEY: ["x"]}})] == ["headers"]
    assert [h.kind for h in find_secrets(b"\xff" + KEY.encode())] == ["OpenAI API key"]


def test_a_bearer_api_key_is_one_hit_of_the_key_kind() -> None:
    hits = list(find_secrets(f"Authorization: Bearer {KEY}, again: {KEY}"))
    assert [h.kind for h in hits] == ["OpenAI API key", "OpenAI API key"]


def test_a_shared_value_is_reported_once_at_the_first_path_that_reaches_it() -> None:
    shared = {"authorization": "Bearer sk-test-51Hx9QmZkP2vL8rT4wY7nB3c"}
    hits = list(find_secrets({"first": shared, "second": [shared, shared]}))
    assert [(hit.kind, hit.field) for hit in hits] == [("OpenAI API key", "first.authorization")]


def test_depth_is_no_limit() -> None:
    value: object = "sk-test-51Hx9QmZkP2vL8rT4wY7nB3c"
    for _ in range(20_000):  # far deeper than Python's recursion limit
        value = [value]
    hits = list(find_secrets({"deep": value}))
    assert [hit.field for hit in hits] == ["deep" + "[0]" * 20_000]


def test_fields_are_reported_in_document_order() -> None:
    key = "sk-test-51Hx9QmZkP2vL8rT4wY7nB3c"
    value = {"b": [key, {"c": key}], "a": key}
    assert [hit.field for hit in find_secrets(value)] == ["b[0]", "b[1].c", "a"]


# -- what a failing replay prints --------------------------------------------------


LIVE = "sk-proj-" + "Zq7Rb3Nd8Lk2Wp5Xs9Jf4Hc6Mv1Tq"  # the key a developer's environment holds


@pytest.mark.parametrize(
    ("recorded", "live"),
    [
        ({"json": {"model": "m", "gateway_credential": "placeholder"}},
         {"json": {"model": "m", "gateway_credential": LIVE}}),  # a JSON field of no known name
        ({"data": {"model": "m", "note": "placeholder"}}, {"data": {"model": "m", "note": LIVE}}),  # a form body
        ({"json": {"model": "m"}}, {"json": {"model": "m", "quoted": f"sk%2Dproj%2D{LIVE[8:]}"}}),  # escaped
    ],
    ids=["json-field", "form-field", "percent-escaped"],
)
def test_a_mismatch_message_never_quotes_a_live_key(
    emu: ProviderEmulator, tmp_path: Path, recorded: dict[str, object], live: dict[str, object]
) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(b"data: [DONE]\n\n"))
    path = tmp_path / "mismatch.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        client.post(emu.url("/v1/chat/completions"), **recorded)  # type: ignore[arg-type]
    with use_cassette(path), httpx.Client() as client, pytest.raises(CassetteError) as raised:
        client.post(emu.url("/v1/chat/completions"), **live)  # type: ignore[arg-type]
    message = str(raised.value)
    assert "no recorded interaction matches" in message and "differs in: body" in message
    assert LIVE not in message and LIVE[8:] not in message
    assert "REDACTED" in message


def test_a_mismatch_message_masks_a_key_in_the_url_path(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(b"data: [DONE]\n\n"))
    path = tmp_path / "mismatch.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        client.post(emu.url("/v1/chat/completions"), json={})
    with use_cassette(path), httpx.Client() as client, pytest.raises(CassetteError) as raised:
        client.post(emu.url(f"/bot{LIVE}/chat/completions"), json={})
    assert LIVE not in str(raised.value)
    assert "/botREDACTED/chat/completions" in str(raised.value)


@pytest.mark.parametrize(
    ("request_kwargs", "field"),
    [
        ({"headers": {"x-forwarded-authorization": "Basic " + base64.b64encode(f"user:{LIVE}".encode()).decode()}},
         "request.headers.x-forwarded-authorization[0] (base64-decoded)"),
        ({"json": {"model": "m", "credentials": base64.b64encode(LIVE.encode()).decode()}},
         "request.body (base64-decoded)"),
    ],
    ids=["basic-in-a-custom-header", "encoded-in-a-body-field"],
)
def test_a_key_in_base64_refuses_the_write(
    emu: ProviderEmulator, tmp_path: Path, request_kwargs: dict[str, object], field: str
) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(b"data: [DONE]\n\n"))
    path = tmp_path / "encoded.yaml"
    with pytest.raises(CassetteError) as caught, use_cassette(path, "once"), httpx.Client() as client:
        client.post(emu.url("/v1/chat/completions"), **request_kwargs)  # type: ignore[arg-type]
    assert f"OpenAI API key found in interaction 0, field {field} (" in str(caught.value)
    assert list(tmp_path.iterdir()) == []
