"""A Python adapter run as if it were written in another language, for ``dsh-replay conform --command``.

    python tests/conformance/foreign_adapter.py MODULE:CLASS BASE_URL OPTIONS_JSON

prints the chunks as JSONL, and an error the adapter raised as a last ``raised`` line, then exits 1.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the adapter may be one of the tests'

from dsh_replay import GenerateOptions, chunk_to_json
from dsh_replay.adapters.route_table import import_target
from dsh_replay.protocol.jsonl import raised_line


async def main(target: str, base_url: str, options_file: str) -> int:
    options = GenerateOptions.from_json(orjson.loads(Path(options_file).read_bytes()))
    adapter = import_target(target, "target")(api_key="sk-test-foreign-0000000000000000", base_url=base_url,
                                              read_timeout=2.0)
    out = sys.stdout.buffer
    try:
        async for chunk in adapter.stream(options):
            out.write(orjson.dumps(chunk_to_json(chunk)) + b"\n")
    except Exception as exc:
        out.write(raised_line(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:4])))
