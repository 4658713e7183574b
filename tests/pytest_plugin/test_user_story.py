"""The whole story of a user: record, replay offline, break the golden, accept, break the request."""

from __future__ import annotations

import pytest

from .helpers import (
    IMPORTS,
    echo_test,
    golden_lines,
    ndjson,
    provider,
    read_lines,
    streaming,
    summary_line,
)


def test_record_replay_diff_update_and_request_regression(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_story=IMPORTS + echo_test("test_greeting", "say hello", body="assert dsh_replay.turn.text == 'Hello'"))
    cassette = project.path / "cassettes" / "test_story" / "test_greeting.yaml"
    golden = cassette.with_name("test_greeting.chunks.jsonl")

    # 1. record against the loopback provider
    with provider(monkeypatch, streaming(ndjson("Hel", "lo"))) as emu:
        result = project.runpytest("--record-mode=once")
        result.assert_outcomes(passed=1)
        assert [r.json() for r in emu.requests] == [{"m": "m", "msgs": ["say hello"]}]
    assert cassette.is_file()
    text = cassette.read_text()
    assert text.startswith("dsh_replay:") and "route: echo" in text
    assert "sk-test-0123456789abcdef" not in text  # the key never reaches disk
    assert read_lines(golden) == golden_lines("Hel", "lo")
    assert golden.read_bytes().endswith(b"\n")
    assert summary_line(result, "cassettes:") == "cassettes: 0 replayed, 1 recorded"
    assert summary_line(result, "goldens:") == "goldens: 0 matched, 1 written, 0 updated"
    assert summary_line(result, "secrets scrubbed:") == "secrets scrubbed: 1"

    # 2. plain pytest replays offline (the provider is gone) and passes
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    assert summary_line(result, "cassettes:") == "cassettes: 1 replayed, 0 recorded"
    assert summary_line(result, "goldens:") == "goldens: 1 matched, 0 written, 0 updated"

    # 3. a golden that no longer matches fails with a readable diff
    recorded = golden.read_bytes()
    golden.write_bytes(recorded.replace(b'"text":"lo"}', b'"text":"LO"}'))
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*golden *test_greeting.chunks.jsonl differs from the adapter's chunks; first difference at chunk 2 (line 3)",
            '- {"type":"text-delta","index":0,"text":"LO"}',
            '+ {"type":"text-delta","index":0,"text":"lo"}',
            "*pytest --update-golden",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert summary_line(result, "goldens:") == "goldens: 0 matched, 0 written, 0 updated, 1 differing"

    # 4. --update-golden accepts the adapter's chunks
    result = project.runpytest("--update-golden")
    result.assert_outcomes(passed=1)
    assert golden.read_bytes() == recorded
    assert summary_line(result, "goldens:") == "goldens: 0 matched, 0 written, 1 updated"
    project.runpytest().assert_outcomes(passed=1)

    # 5. a regression in the request mapping fails with the request diff
    adapter = project.path / "echo_adapter.py"
    adapter.write_text(adapter.read_text().replace('"msgs": [m.content', '"messages": [m.content'))
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cassette *test_greeting.yaml: no recorded interaction matches POST */gen",
            "*differs in: body*",
            "*changed JSON fields: messages, msgs*",
            '*-  "msgs": [*',
            '*+  "messages": [*',
            "*--record-mode=rewrite*",
        ]
    )
    # one failure with the message alone: no traceback through the engine, no second
    # error about the interaction the test never got to play
    assert not [line for line in result.outlines if line.startswith(("E ", "During handling"))]
    assert "ERROR" not in result.stdout.str()
    assert golden.read_bytes() == recorded
