"""A key the provider quotes back never reaches the golden: its ``raised`` line is masked too."""

from __future__ import annotations

import json

import pytest

from dsh_replay.testing import ScriptedResponse

from .helpers import IMPORTS, provider, read_lines

#: the key ``make_adapter()`` sends in its Authorization header
KEY = "sk-test-0123456789abcdef"

EXPECTS_ERROR = IMPORTS + """
@pytest.mark.asyncio
async def test_bad_key(dsh_replay):
    await dsh_replay.stream(make_adapter(), make_options("hi"), expect_error=True)
"""


def test_a_key_quoted_by_a_401_is_masked_in_cassette_and_golden(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_auth=EXPECTS_ERROR)
    quoted = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error"}})
    with provider(monkeypatch, ScriptedResponse(status=401, fragments=[quoted.encode()],
                                                headers={"content-type": "application/json"})):
        recorded = project.runpytest("--record-mode=once")
    recorded.assert_outcomes(passed=1)
    folder = project.path / "cassettes" / "test_auth"
    cassette, golden = folder / "test_bad_key.yaml", folder / "test_bad_key.chunks.jsonl"
    assert KEY not in cassette.read_text()
    raised = json.loads(read_lines(golden)[-1])
    assert raised["type"] == "raised" and raised["error"] == "AuthenticationError"
    assert "Incorrect API key provided: REDACTED" in raised["message"]
    assert KEY not in golden.read_text()

    # the replay quotes the masked body, so it matches the masked golden
    replayed = project.runpytest()
    replayed.assert_outcomes(passed=1)
