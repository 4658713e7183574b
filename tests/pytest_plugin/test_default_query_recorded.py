"""An adapter built with ``default_query`` (Azure OpenAI's ``api-version``) is recorded with it, and replayed with it.

The fixture writes the query into the cassette's ``dsh_replay.adapter``; ``check``
and ``conform`` then build the replaying adapter with it, so the recorded
request (query included) still matches with the normal matchers.
"""

from __future__ import annotations

import io

import pytest
import yaml

from dsh_replay.cli.main import main

INNER = '''
import pytest
from dsh_replay import GenerateOptions, Message
from dsh_replay.adapters.openai_chat import OpenAIChatAdapter
from dsh_replay.testing import ScriptedResponse

BODY = (
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"content":"Hi"},"finish_reason":null}]}\\n\\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
    b'"finish_reason":"stop"}]}\\n\\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,'
    b'"completion_tokens":1,"total_tokens":4}}\\n\\n'
    b'data: [DONE]\\n\\n'
)


@pytest.mark.asyncio
async def test_azure(dsh_replay, dsh_replay_emulator):
    dsh_replay_emulator.add("POST", "/openai/deployments/gpt-4o/chat/completions",
                            ScriptedResponse.streaming(BODY, delay=0.001))
    adapter = OpenAIChatAdapter("sk-test-azure-0123456789abcdef",
                                base_url=dsh_replay_emulator.base_url + "/openai/deployments/gpt-4o",
                                default_query={"api-version": "2024-06-01"})
    await dsh_replay.stream(adapter, GenerateOptions(model="gpt-4o", messages=[Message(role="user", content="hi")]))
    assert [r.query for r in dsh_replay_emulator.requests] in ([], [{"api-version": "2024-06-01"}])
'''


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue() + err.getvalue()


def test_the_query_is_recorded_and_check_and_conform_replay_with_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(test_q=INNER)
    project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=1)
    cassette = project.path / "cassettes" / "test_q" / "test_azure.yaml"
    data = yaml.safe_load(cassette.read_text(encoding="utf-8"))
    assert data["dsh_replay"]["adapter"] == {"default_query": {"api-version": "2024-06-01"}}
    assert data["interactions"][0]["request"]["uri"].endswith("/chat/completions?api-version=2024-06-01")

    monkeypatch.chdir(project.path)
    code, out = cli("check", str(cassette.parent))
    assert code == 0, out
    assert "1 passed, 0 failed" in out
    code, out = cli("conform", "dsh_replay.adapters.openai_chat:OpenAIChatAdapter", "--route", "openai",
                    str(cassette.parent))
    assert code == 0, out

    # without the query the adapter's request is another one: the replay says so
    del data["dsh_replay"]["adapter"]
    cassette.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out = cli("check", str(cassette.parent))
    assert code == 1
    assert "no recorded interaction matches" in out
