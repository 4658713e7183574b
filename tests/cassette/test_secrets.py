"""The scan's reach: percent-encoded text, any-case bearer schemes, compressed bodies."""

from __future__ import annotations

import base64
import gzip
import time
import tracemalloc
import zlib
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_replay.cassette import secrets
from dsh_replay.cassette.secrets import Located, find_file_secrets, find_secrets

# Shaped like real keys; none is one.
OPENAI = "sk-test-" + "Vb7Qx2Lm9Rt4Kp8Zs3Wd6Hj1"
GOOGLE = "AIza" + "SyD3f8Kq1Lm2Np3Or4St5Uv6Wx7Yz8Ab9Cd"
ANTHROPIC = "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AAAA"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"


def _found(value: object) -> list[tuple[str, str, str]]:
    return [(hit.kind, hit.field, hit.excerpt) for hit in find_secrets(value, "f")]


# -- percent-encoding ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        f"https://example.test/v1?x=1&token=%3D{GOOGLE}",  # "%3D" ends in a letter, yet is "="
        f"key=abc%3D{GOOGLE}&alt=sse",  # a form body
        f"https://example.test/cb?next=%2F{GOOGLE}",
        f"https://example.test/cb?k=%3d{GOOGLE}",  # lowercase hex
    ],
)
def test_a_key_right_after_a_percent_escape_is_found_in_the_raw_text(value: str) -> None:
    assert _found(value) == [("Google API key", "f", "AIzaSyD3…")]


@pytest.mark.parametrize(
    ("value", "kind", "excerpt"),
    [
        (f"/cb?token=%253D{GOOGLE}", "Google API key", "AIzaSyD3…"),  # encoded twice
        ("sk%2Dtest%2DVb7Qx2Lm9Rt4Kp8Zs3Wd6Hj1", "OpenAI API key", "sk-test-…"),
        (f"auth=Bearer%20{JWT}", "bearer token", "Bearer e…"),
        (f"u=sk-ant-api03%2D{ANTHROPIC[13:]}", "Anthropic API key", "sk-ant-a…"),
    ],
)
def test_a_key_only_the_decoded_text_shows_is_found_there(value: str, kind: str, excerpt: str) -> None:
    assert _found(value) == [(kind, "f (percent-decoded)", excerpt)]


def test_a_key_found_raw_is_not_reported_again_from_the_decoded_text() -> None:
    value = f"Location: /cb?a=%3D{GOOGLE}&b={OPENAI}%26c%3D1 and {OPENAI}"
    assert _found(value) == [
        ("OpenAI API key", "f", "sk-test-…"),
        ("OpenAI API key", "f", "sk-test-…"),
        ("Google API key", "f", "AIzaSyD3…"),
    ]


def test_a_key_cut_short_by_an_escape_is_one_hit() -> None:
    # raw, "Bearer <jwt>" stops at "%2B"; decoded, it runs on: the same secret
    assert _found(f"Bearer {JWT}%2Bmore") == [("bearer token", "f", "Bearer e…")]


@pytest.mark.parametrize(
    "value",
    [
        "q=caf%C3%A9%20au%20lait&page=2&sort=-date",
        "100%25 sure, 50% off, %ZZ is no escape",
        "path=%2Fv1%2Fchat%2Fcompletions%3Fstream%3Dtrue",
        "task%2Dforce%2Dthe%2Dquick%2Dbrown%2Dfox",  # "sk-" inside a word, decoded
        f"q=%41{GOOGLE[:-4]}",  # "%41" is "A": a word goes on, no key starts
        "msg%5F01XFDUDYJgAACzvnptvVoYEL",
        "https://example.test/?key=REDACTED&next=%2Fhome",
    ],
)
def test_ordinary_percent_encoded_text_is_not_a_secret(value: str) -> None:
    assert _found(value) == []


# -- bearer, in any case ---------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_is_case_insensitive(scheme: str) -> None:
    header = {"x-proxy-auth": [f"{scheme} abc123def456ghi789jkl"]}
    assert _found(header) == [("bearer token", "f.x-proxy-auth[0]", f"{scheme} a…")]


@pytest.mark.parametrize(
    "value",
    [
        "The bearer of this letter is to be given every assistance.",
        "bearer tokens go in the Authorization header",
        "Send it as a bearer token: bearer REDACTED",
        "cobearer abc123def456ghi789jkl",  # not the scheme: inside a word
        "bearer short",
    ],
)
def test_the_word_bearer_in_prose_is_not_a_secret(value: str) -> None:
    assert _found(value) == []


# -- compressed bodies -----------------------------------------------------------------

ECHO = f'{{"error":{{"message":"Incorrect API key provided: {OPENAI}"}}}}'.encode()


def _small_window_zlib(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=9)  # another RFC 1950 header: "\x18..." not "x\x9c"
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (gzip.compress(ECHO), "f (decompressed gzip)"),
        (zlib.compress(ECHO), "f (decompressed deflate)"),
        (_small_window_zlib(ECHO), "f (decompressed deflate)"),
        (gzip.compress(b'{"ok":') + gzip.compress(ECHO), "f (decompressed gzip)"),  # two members
        (gzip.compress(ECHO)[:-12], "f (decompressed gzip)"),  # cut off: what came through is scanned
    ],
    ids=["gzip", "zlib", "small-window", "members", "truncated"],
)
def test_a_key_in_a_compressed_body_is_found(body: bytes, field: str) -> None:
    assert OPENAI.encode() not in body
    assert _found(body) == [("OpenAI API key", field, "sk-test-…")]


def test_a_damaged_stream_gives_what_came_before_the_damage() -> None:
    rest = bytes(range(256)) * 2048  # incompressible enough to span several chunks
    body = bytearray(gzip.compress(ECHO + rest, 1))
    body[len(body) // 2 :] = b"\xff" * (len(body) - len(body) // 2)
    with pytest.raises(zlib.error):
        zlib.decompress(bytes(body), 16 + zlib.MAX_WBITS)
    assert _found(bytes(body)) == [("OpenAI API key", "f (decompressed gzip)", "sk-test-…")]


def _bomb(*pieces: bytes, zeros_mib: int) -> bytes:
    """gzip of ``pieces`` with ``zeros_mib`` MiB of zeros after the first, built without holding them."""
    compressor = zlib.compressobj(6, wbits=16 + zlib.MAX_WBITS)
    out = [compressor.compress(pieces[0])]
    out += [compressor.compress(bytes(1 << 20)) for _ in range(zeros_mib)]
    out += [compressor.compress(piece) for piece in pieces[1:]]
    return b"".join(out) + compressor.flush()


def test_a_zip_bomb_is_cut_at_16_mib() -> None:
    # 256 MiB inside 256 KiB; a key before the cap is found, one after it is not
    body = _bomb(bytes(15 << 20) + OPENAI.encode(), ANTHROPIC.encode(), zeros_mib=256)
    assert len(body) < 1 << 20
    tracemalloc.start()
    try:
        started = time.perf_counter()
        assert _found(body) == [("OpenAI API key", "f (decompressed gzip)", "sk-test-…")]
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20  # the 16 MiB inflated and its text, not 256 MiB
    assert elapsed < 5


def test_a_key_past_the_cap_is_not_looked_for() -> None:
    body = gzip.compress(b"\0" * (16 << 20) + OPENAI.encode())
    assert _found(body) == []


@pytest.mark.parametrize(
    "body",
    [
        gzip.compress(b'{"error":{"message":"Incorrect API key provided: sk-test-***"}}'),
        b"\x1f\x8b not really gzip " + b"\xff" * 40,
        b"x^ a text that happens to start with a zlib-like header",
        b"\x00\x01\x02 plain binary",
    ],
    # ids of their own: gzip output holds a timestamp, and xdist workers must collect the same ids
    ids=["gzip-masked-key", "fake-gzip-header", "zlib-like-text", "binary"],
)
def test_compressed_or_binary_bodies_without_keys_are_clean(body: bytes) -> None:
    assert _found(body) == []


def test_a_key_outside_the_compressed_stream_is_still_found_raw() -> None:
    assert _found(b"\xff" + OPENAI.encode()) == [("OpenAI API key", "f", "sk-test-…")]


# -- JSON string escapes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind", "excerpt"),
    [
        (f'{{"content": "see\\n{OPENAI}"}}', "OpenAI API key", "sk-test-…"),  # after an escaped line break
        (f'{{"content": "see\\\\n{OPENAI}"}}', "OpenAI API key", "sk-test-…"),  # escaped twice: JSON in JSON
        (f"token\\u003d{GOOGLE}", "Google API key", "AIzaSyD3…"),  # "\u003d" is "=", yet ends in a letter
        (f'"\\t{ANTHROPIC}"', "Anthropic API key", "sk-ant-a…"),
    ],
)
def test_a_key_only_the_unescaped_text_shows_is_found_there(value: str, kind: str, excerpt: str) -> None:
    assert _found(value) == [(kind, "f (unescaped)", excerpt)]


@pytest.mark.parametrize(
    "value",
    [
        '{"path": "C:\\\\new\\\\task-force-the-quick-brown-fox"}',
        '{"text": "caf\\u00e9 \\"quoted\\" \\ud83d\\ude00"}',
        f'{{"content": "\\u0041{GOOGLE[:-4]}"}}',  # "\u0041" is "A": a word goes on, no key starts
    ],
)
def test_ordinary_escaped_text_is_not_a_secret(value: str) -> None:
    assert _found(value) == []


def test_a_key_found_raw_is_not_reported_again_from_the_unescaped_text() -> None:
    assert _found(f'{{"content": "\\"{OPENAI}\\""}}') == [("OpenAI API key", "f", "sk-test-…")]


# -- a file: parsed values and raw text ------------------------------------------------


def _file_hits(text: str, *values: Located) -> list[tuple[str, str]]:
    return [(hit.kind, hit.field) for hit in find_file_secrets(text, values)]


def test_the_raw_text_of_a_value_already_reported_is_not_reported_again() -> None:
    text = f"a: x\nb: '{OPENAI}'\n"
    assert _file_hits(text, Located("a", "x", 1, 1), Located("b", OPENAI, 2, 2)) == [("OpenAI API key", "b")]


def test_what_only_the_raw_text_shows_is_reported_by_line_in_line_order() -> None:
    text = f"# {GOOGLE}\nb: '{OPENAI}'\nc: 1  # {OPENAI}\n"
    assert _file_hits(text, Located("b", OPENAI, 2, 2), Located("c", "1", 3, 3)) == [
        ("Google API key", "line 1"),
        ("OpenAI API key", "b"),
        ("OpenAI API key", "line 3"),  # the same key, seen again where no value holds it
    ]


def test_a_base64_run_in_the_raw_text_is_decoded_and_inflated() -> None:
    encoded = base64.encodebytes(gzip.compress(ECHO)).decode()
    text = "body: |\n" + "".join(f"  {line}\n" for line in encoded.splitlines())
    assert OPENAI not in text
    assert _file_hits(text) == [("OpenAI API key", "line 2 (base64-decoded) (decompressed gzip)")]
    # a parsed value that held the body already showed it, at its field
    assert _file_hits(text, Located("body", gzip.compress(ECHO), 1, 3)) == [
        ("OpenAI API key", "body (decompressed gzip)")
    ]


def test_long_words_and_ids_are_not_taken_for_base64_secrets() -> None:
    text = "id: chatcmpl0123456789abcdefghijklmnopqrstuvwxyzABCDEF\nsig: " + "QUJD" * 40 + "\n"
    assert _file_hits(text) == []


def test_a_short_string_scanned_again_is_found_again_and_a_long_one_too() -> None:
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    short = f"Bearer {key}"
    long = "x " * 400 + key  # longer than the strings whose findings are remembered
    for _ in range(3):
        assert [hit.kind for hit in find_secrets({"headers": {"authorization": [short]}})]
        assert [hit.kind for hit in find_secrets({"body": long})] == ["OpenAI API key"]
    # the same value under another field is reported at that field
    assert [hit.field for hit in find_secrets({"x-note": short})] == ["x-note"]


# The case-insensitive patterns are tried only where one of their first words begins; the engine's own
# scan of every position is the reference, on texts made of those words in every case the engine takes
# for them (the Kelvin sign, the dotless and dotted capital i), the rest of the patterns, and noise.
_KEY = "Zq7a1B2c3D4e5F6g7H8i9J0k1L2m"
_PIECES = [
    "incorrect", "Invalid", "WRONG", "unknown", "expired", "revoked", "bad", "Bearer", "bearer", "BEARER",
    "\u0131nvalid", "\u0130nvalid", "un\u212anown", "revo\u212aed", " api key", " API_key", " token", " key",
    " provided", ": ", "=", "'", '"', " ", "\n", "REDACTED", _KEY, "0123456789", "é", "\u017f", "x",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
@settings(max_examples=400, deadline=None)
def test_the_word_search_finds_what_the_engine_finds(text: str) -> None:
    with mock.patch.dict(secrets._STARTS, clear=True):
        everywhere = list(secrets._matches(text))
    assert list(secrets._matches(text)) == everywhere


@pytest.mark.parametrize("text", [
    f"Incorrect API key provided: {_KEY}. You can find your API key at ...",
    f"error: \u0131nvalid api_key = '{_KEY}'",
    f"\u0130nvalid token: {_KEY}",  # a lower case longer than the text: every position is tried
    f"revo\u212aed key: {_KEY} and then Authorization: BEARER {_KEY}",
    f"bad bad token={_KEY} bearer bearer {_KEY}",
])
def test_keys_quoted_after_the_words_are_found_in_every_spelling_the_engine_takes(text: str) -> None:
    found = list(secrets._matches(text))
    assert found and all(_KEY in secret for _, secret in found)
    with mock.patch.dict(secrets._STARTS, clear=True):
        assert found == list(secrets._matches(text))


def test_no_start_word_begins_inside_another_so_one_search_finds_every_beginning() -> None:
    for words in secrets.START_WORDS.values():
        for word in words:
            for other in words:
                assert not any(other.startswith(word[cut:]) or word[cut:].startswith(other)
                               for cut in range(1, len(word))), (word, other)


@pytest.mark.parametrize("window", [64, 100, 1 << 20])
def test_a_key_in_base64_is_found_wherever_the_windows_cut_the_text(window: int) -> None:
    encoded = base64.b64encode(f"user:{OPENAI}".encode()).decode()
    text = "é" * 30 + " Basic " + encoded + " and more" + " x" * 40  # non-ASCII before: positions still line up
    with mock.patch.object(secrets, "_BASE64_WINDOW", window):
        assert _found(text) == [("OpenAI API key", "f (base64-decoded)", "sk-test-…")]
        # a run longer than a window is read in pieces, and the scan ends
        assert _found("A" * (3 * window + 7)) == []
