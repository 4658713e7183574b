"""``dsh-replay scan``: credential-shaped strings in cassettes and goldens, by file and field."""

from __future__ import annotations

import base64
import gzip
from pathlib import Path

import pytest

from .conftest import run
from .unlistable import AS_ROOT, refuse_listing

# Shaped like real keys, none is one; built from pieces so no file of the repository holds a key-shaped literal.
KEY = "sk-test-" + "51Hx9QmZkP2vL8rT4wY7nB3c"
OPENAI = "sk-test-" + "Vb7Qx2Lm9R" + "t4Kp8Zs3Wd" + "6Hj1Nc5Fy0" + "Ge2Ua7Io4P"  # 40 characters after the prefix
ANTHROPIC = "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe" + "-AAAA"
GOOGLE = "AIza" + "SyD3f8Kq1Lm2Np3Or4St5Uv6Wx7Yz8Ab9Cd"  # 35 characters after the prefix


def test_clean_files_pass(project: Path) -> None:
    result = run("scan", "cassettes")
    assert (result.code, result.out, result.err) == (0, "scanned 4 file(s): 0 secret(s) found\n", "")


def test_a_planted_key_in_a_header_is_found_by_file_and_field(project: Path) -> None:
    cassette = project / "cassettes" / "my-provider" / "greeting.yaml"
    cassette.write_text(cassette.read_text(encoding="utf-8").replace("REDACTED", f"Bearer {KEY}"), encoding="utf-8")
    result = run("scan", "cassettes")
    assert result.code == 1
    assert result.out.splitlines() == [
        f"{Path('cassettes/my-provider/greeting.yaml')}: OpenAI API key in "
        "interactions[0].request.headers.authorization[0]: sk-test-…",
        "remove them (scrub the header, query parameter or body) and rotate any real key",
        "scanned 4 file(s): 1 secret(s) found",
    ]
    assert KEY not in result.out  # a scan report must not leak what it found


def test_keys_in_goldens_json_and_unparsable_files(tmp_path: Path) -> None:
    golden = tmp_path / "leak.chunks.jsonl"
    golden.write_text('{"type":"usage","usage":{"inputTokens":1,"outputTokens":1}}\n'
                      f'{{"type":"text-delta","index":0,"text":"my key is {KEY}"}}\n', encoding="utf-8")
    (tmp_path / "options.json").write_text(f'{{"extra": {{"api_key": "sk-ant-api03-{"a" * 24}"}}}}', encoding="utf-8")
    (tmp_path / "broken.yaml").write_text(f"interactions: [\n  AIza{'B' * 35}\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text(KEY, encoding="utf-8")  # not a cassette or chunk file: not scanned
    result = run("scan", str(tmp_path))
    assert result.code == 1
    assert result.out.splitlines()[:3] == [
        f"{tmp_path / 'broken.yaml'}: Google API key in line 2: AIzaBBBB…",  # it does not parse: by line
        f"{golden}: OpenAI API key in line 2.text: sk-test-…",
        f"{tmp_path / 'options.json'}: Anthropic API key in extra.api_key: sk-ant-a…",
    ]
    assert result.out.endswith("scanned 3 file(s): 3 secret(s) found\n")


def test_placeholders_and_redacted_values_are_not_secrets(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(
        "headers:\n  authorization: [Bearer REDACTED]\n  x-api-key: [acme-offline-key]\n", encoding="utf-8"
    )
    assert run("scan", str(tmp_path)).code == 0


def test_missing_path_is_named(tmp_path: Path) -> None:
    result = run("scan", str(tmp_path / "absent"))
    assert (result.code, result.out) == (2, "")
    assert result.err == f"dsh-replay: error: {tmp_path / 'absent'}: no such file or folder\n"


def test_a_folder_that_cannot_be_listed_is_an_error_naming_it(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # rglob passes over it in silence: "scanned 2 file(s): 0 secret(s) found", exit 0
    locked = Path("cassettes", "locked")
    locked.mkdir()
    (locked / "leak.yaml").write_text(f"key: {KEY}\n", encoding="utf-8")
    refuse_listing(monkeypatch, locked)
    result = run("scan", "cassettes")
    # as for a file that cannot be read: an error, exit 2
    assert (result.code, result.out) == (2, "")
    assert result.err == f"dsh-replay: error: cannot read folder {locked}: Permission denied\n"


@pytest.mark.skipif(AS_ROOT, reason="chmod 000 does not stop root")
def test_a_folder_without_read_permission_is_an_error(project: Path) -> None:
    locked = project / "cassettes" / "my-provider"
    locked.chmod(0)
    try:
        result = run("scan", "cassettes")
    finally:
        locked.chmod(0o755)
    assert result.code == 2
    assert result.err == f"dsh-replay: error: cannot read folder {Path('cassettes', 'my-provider')}: Permission denied\n"


def test_nested_yaml_aliases_are_walked_once(tmp_path: Path) -> None:
    # Five levels of nine aliases each make 9**5 paths to one leaf (nine more
    # levels and a walk along every path would never end); walked once, the
    # leaf's secret is found once.
    levels = [f"l0: &l0 [x, x, {KEY}]"]
    levels += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 6)]
    (tmp_path / "bomb.yaml").write_text("\n".join(levels) + "\ninteractions: *l5\n", encoding="utf-8")
    result = run("scan", str(tmp_path))
    assert result.code == 1
    assert result.out.splitlines()[0] == f"{tmp_path / 'bomb.yaml'}: OpenAI API key in l0[2]: sk-test-…"
    assert result.out.splitlines()[-1] == "scanned 1 file(s): 1 secret(s) found"


def _cassette(uri: str, header: str, body: bytes) -> str:
    """A cassette with one interaction: ``uri``, an ``x-proxy-auth`` header, a gzip ``!!binary`` body."""
    return (
        "interactions:\n"
        f"- request: {{method: POST, uri: '{uri}', headers: {{x-proxy-auth: ['{header}']}}, body: ''}}\n"
        "  response:\n"
        "    status: {code: 401, message: Unauthorized}\n"
        "    headers: {content-encoding: [gzip]}\n"
        f"    body: {{string: !!binary '{base64.b64encode(gzip.compress(body)).decode()}'}}\n"
    )


def test_keys_hidden_by_encoding_are_found(tmp_path: Path) -> None:
    google = GOOGLE
    (tmp_path / "hidden.yaml").write_text(_cassette(
        f"https://example.test/v1/chat?x=1&token=%3D{google}",
        "bearer abc123def456ghi789jkl",
        f'{{"error": {{"message": "Incorrect API key provided: {KEY}"}}}}'.encode(),
    ), encoding="utf-8")
    result = run("scan", str(tmp_path))
    assert result.code == 1
    path = tmp_path / "hidden.yaml"
    assert result.out.splitlines() == [
        f"{path}: Google API key in interactions[0].request.uri: AIzaSyD3…",
        f"{path}: bearer token in interactions[0].request.headers.x-proxy-auth[0]: bearer a…",
        f"{path}: OpenAI API key in interactions[0].response.body.string (decompressed gzip): sk-test-…",
        "remove them (scrub the header, query parameter or body) and rotate any real key",
        "scanned 1 file(s): 3 secret(s) found",
    ]
    assert KEY not in result.out and google not in result.out


def test_encoded_text_without_keys_is_clean(tmp_path: Path) -> None:
    (tmp_path / "clean.yaml").write_text(_cassette(
        "https://example.test/v1/search?q=caf%C3%A9%20au%20lait&next=%2Fv1%2Fchat%3Fstream%3Dtrue&key=REDACTED",
        "bearer REDACTED",
        b'{"error": {"message": "Incorrect API key provided: sk-test-***. The bearer of a key must keep it."}}',
    ), encoding="utf-8")
    assert run("scan", str(tmp_path)).out == "scanned 1 file(s): 0 secret(s) found\n"


# -- the raw text as well as the parsed values -------------------------------------------


def test_a_key_in_a_yaml_comment_is_found_by_line(project: Path) -> None:
    cassette = project / "cassettes" / "my-provider" / "greeting.yaml"
    cassette.write_text(f"# recorded with MY_PROVIDER_API_KEY={OPENAI}\n" + cassette.read_text(encoding="utf-8"),
                        encoding="utf-8")
    result = run("scan", "cassettes")
    assert result.code == 1
    assert result.out.splitlines() == [
        f"{Path('cassettes/my-provider/greeting.yaml')}: OpenAI API key in line 1: sk-test-…",
        "remove them (scrub the header, query parameter or body) and rotate any real key",
        "scanned 4 file(s): 1 secret(s) found",
    ]
    assert OPENAI not in result.out and OPENAI[8:16] not in result.out


def test_comments_fields_and_escaped_json_each_sighting_once(tmp_path: Path) -> None:
    # the body is JSON inside a YAML string, holding JSON inside a JSON string: the
    # Google key comes after an escaped line break ("\\n"), so it seems to go on the word "n"
    body = '{"messages": [{"role": "user", "content": "{\\"note\\": \\"see\\\\n' + GOOGLE + '\\"}"}]}'
    cassette = tmp_path / "mixed.yaml"
    cassette.write_text("\n".join([
        f"# recorded with OPENAI_API_KEY={OPENAI}",
        "interactions:",
        "- request:",
        "    method: POST",
        f"    headers: {{x-api-key: ['{ANTHROPIC}']}}",
        f"    body: '{body}'",
        "  response:",
        "    status: {code: 200, message: OK}",
        f"    body: {{string: 'ok'}}  # the key again: {ANTHROPIC}",
    ]) + "\n", encoding="utf-8")
    result = run("scan", str(tmp_path))
    assert result.code == 1
    assert result.out.splitlines() == [
        f"{cassette}: OpenAI API key in line 1: sk-test-…",
        f"{cassette}: Anthropic API key in interactions[0].request.headers.x-api-key[0]: sk-ant-a…",
        f"{cassette}: Google API key in interactions[0].request.body (unescaped): AIzaSyD3…",
        f"{cassette}: Anthropic API key in line 9: sk-ant-a…",
        "remove them (scrub the header, query parameter or body) and rotate any real key",
        "scanned 1 file(s): 4 secret(s) found",
    ]
    for key in (OPENAI, ANTHROPIC, GOOGLE):
        assert key not in result.out


def test_a_plain_escaped_quote_key_is_one_hit_not_two(tmp_path: Path) -> None:
    # the raw line and the parsed value both show it: one sighting, named by its field
    (tmp_path / "quoted.yaml").write_text(
        f"""body: {{string: '{{"content": "{{\\"api_key\\": \\"{OPENAI}\\"}}"}}'}}\n""", encoding="utf-8")
    result = run("scan", str(tmp_path))
    assert result.out.splitlines()[0] == f"{tmp_path / 'quoted.yaml'}: OpenAI API key in body.string: sk-test-…"
    assert result.out.endswith("scanned 1 file(s): 1 secret(s) found\n")


def _gzip_b64(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode())).decode()


def test_base64_bodies_no_parser_decodes_are_decoded_and_inflated(tmp_path: Path) -> None:
    echo = f'{{"error": {{"message": "Incorrect API key provided: {OPENAI}"}}}}'
    # a JSON cassette keeps its body as a base64 string; a YAML one that no longer parses
    (tmp_path / "a.json").write_text(f'{{"interactions": [{{"response": {{"body": {{"base64_string": "{_gzip_b64(echo)}"}}}}}}]}}',
                                     encoding="utf-8")
    folded = base64.encodebytes(gzip.compress(echo.encode())).decode().replace("\n", "\n    ")
    (tmp_path / "b.yaml").write_text(f"interactions: [\n  body: !!binary |\n    {folded}\n", encoding="utf-8")
    result = run("scan", str(tmp_path))
    assert result.code == 1
    assert result.out.splitlines()[:2] == [
        f"{tmp_path / 'a.json'}: OpenAI API key in line 1 (base64-decoded) (decompressed gzip): sk-test-…",
        f"{tmp_path / 'b.yaml'}: OpenAI API key in line 3 (base64-decoded) (decompressed gzip): sk-test-…",
    ]
    assert result.out.endswith("scanned 2 file(s): 2 secret(s) found\n")


def test_a_key_in_a_binary_body_is_one_hit_at_its_field(tmp_path: Path) -> None:
    echo = f"Incorrect API key provided: {GOOGLE}"
    folded = base64.encodebytes(gzip.compress(echo.encode())).decode().replace("\n", "\n      ")
    (tmp_path / "c.yaml").write_text(f"interactions:\n- response:\n    body: !!binary |\n      {folded}\n",
                                     encoding="utf-8")
    result = run("scan", str(tmp_path))
    assert result.out.splitlines()[0] == (
        f"{tmp_path / 'c.yaml'}: Google API key in interactions[0].response.body (decompressed gzip): AIzaSyD3…")
    assert result.out.endswith("scanned 1 file(s): 1 secret(s) found\n")
