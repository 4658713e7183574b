"""dsh-replay: record-and-replay testing for LLM provider adapters of the dsh harness.

Chunks and blocks are the StreamChunk protocol; the validator checks rules
P1-P12; goldens are JSONL; cassettes keep streamed responses fragment by
fragment. See README.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

if TYPE_CHECKING:
    from .cassette.intercept import NothingRecordedWarning
    from .cassette.pacing import Fault, Fragmentation
    from .cassette.scrub import Scrubber
    from .cassette.session import CassetteSession, use_cassette
    from .cassette.store import RecordMode
    from .errors import (
        AuthenticationError,
        CassetteError,
        ConfigError,
        DshReplayError,
        InvalidRequestError,
        MalformedStreamError,
        OverloadedError,
        ProtocolViolation,
        ProviderError,
        RateLimitError,
        ServerError,
        StreamInterruptedError,
        StreamTimeoutError,
    )
    from .protocol.adapter import LlmAdapter, LlmRegistry
    from .protocol.chunks import (
        Block,
        BlockEnd,
        BlockStart,
        CallId,
        Finish,
        FinishReason,
        ReasoningBlock,
        ReasoningDelta,
        StreamChunk,
        TextBlock,
        TextDelta,
        ToolCallBlock,
        ToolCallDelta,
        Usage,
        UsageChunk,
    )
    from .protocol.jsonl import (
        Golden,
        Raised,
        chunk_from_json,
        chunk_to_json,
        dump_jsonl,
        load_golden,
        load_jsonl,
    )
    from .protocol.options import GenerateOptions, Message, MessageToolCall, ToolDefinition
    from .protocol.turn import ToolCall, Turn, collect
    from .protocol.validator import (
        SequenceValidator,
        Violation,
        assert_chunk_sequence,
        check_chunk_sequence,
    )
    from .seed_config import PluginContext, load_plugins
    from .wire.ndjson import NDJSONDecoder
    from .wire.sequencer import BlockSequencer
    from .wire.sse import SSEDecoder, SSEEvent

# name -> module that defines it. Resolved on first use (PEP 562), so that
# `import dsh_replay` and the command line's --help do not pay for the
# cassette engine and httpx until something needs them.
_EXPORTS: dict[str, str] = {
    "AuthenticationError": ".errors",
    "Block": ".protocol.chunks",
    "BlockEnd": ".protocol.chunks",
    "BlockSequencer": ".wire.sequencer",
    "BlockStart": ".protocol.chunks",
    "CallId": ".protocol.chunks",
    "CassetteError": ".errors",
    "CassetteSession": ".cassette.session",
    "ConfigError": ".errors",
    "DshReplayError": ".errors",
    "Fault": ".cassette.pacing",
    "Finish": ".protocol.chunks",
    "FinishReason": ".protocol.chunks",
    "Fragmentation": ".cassette.pacing",
    "GenerateOptions": ".protocol.options",
    "Golden": ".protocol.jsonl",
    "InvalidRequestError": ".errors",
    "LlmAdapter": ".protocol.adapter",
    "LlmRegistry": ".protocol.adapter",
    "MalformedStreamError": ".errors",
    "Message": ".protocol.options",
    "MessageToolCall": ".protocol.options",
    "NDJSONDecoder": ".wire.ndjson",
    "NothingRecordedWarning": ".cassette.intercept",
    "OverloadedError": ".errors",
    "PluginContext": ".seed_config",
    "ProtocolViolation": ".errors",
    "ProviderError": ".errors",
    "Raised": ".protocol.jsonl",
    "RateLimitError": ".errors",
    "ReasoningBlock": ".protocol.chunks",
    "ReasoningDelta": ".protocol.chunks",
    "RecordMode": ".cassette.store",
    "SSEDecoder": ".wire.sse",
    "SSEEvent": ".wire.sse",
    "Scrubber": ".cassette.scrub",
    "SequenceValidator": ".protocol.validator",
    "ServerError": ".errors",
    "StreamChunk": ".protocol.chunks",
    "StreamInterruptedError": ".errors",
    "StreamTimeoutError": ".errors",
    "TextBlock": ".protocol.chunks",
    "TextDelta": ".protocol.chunks",
    "ToolCall": ".protocol.turn",
    "ToolCallBlock": ".protocol.chunks",
    "ToolCallDelta": ".protocol.chunks",
    "ToolDefinition": ".protocol.options",
    "Turn": ".protocol.turn",
    "Usage": ".protocol.chunks",
    "UsageChunk": ".protocol.chunks",
    "Violation": ".protocol.validator",
    "assert_chunk_sequence": ".protocol.validator",
    "check_chunk_sequence": ".protocol.validator",
    "chunk_from_json": ".protocol.jsonl",
    "chunk_to_json": ".protocol.jsonl",
    "collect": ".protocol.turn",
    "dump_jsonl": ".protocol.jsonl",
    "load_golden": ".protocol.jsonl",
    "load_jsonl": ".protocol.jsonl",
    "load_plugins": ".seed_config",
    "use_cassette": ".cassette.session",
}

__all__ = [
    "AuthenticationError",
    "Block",
    "BlockEnd",
    "BlockSequencer",
    "BlockStart",
    "CallId",
    "CassetteError",
    "CassetteSession",
    "ConfigError",
    "DshReplayError",
    "Fault",
    "Finish",
    "FinishReason",
    "Fragmentation",
    "GenerateOptions",
    "Golden",
    "InvalidRequestError",
    "LlmAdapter",
    "LlmRegistry",
    "MalformedStreamError",
    "Message",
    "MessageToolCall",
    "NDJSONDecoder",
    "NothingRecordedWarning",
    "OverloadedError",
    "PluginContext",
    "ProtocolViolation",
    "ProviderError",
    "Raised",
    "RateLimitError",
    "ReasoningBlock",
    "ReasoningDelta",
    "RecordMode",
    "SSEDecoder",
    "SSEEvent",
    "Scrubber",
    "SequenceValidator",
    "ServerError",
    "StreamChunk",
    "StreamInterruptedError",
    "StreamTimeoutError",
    "TextBlock",
    "TextDelta",
    "ToolCall",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolDefinition",
    "Turn",
    "Usage",
    "UsageChunk",
    "Violation",
    "assert_chunk_sequence",
    "check_chunk_sequence",
    "chunk_from_json",
    "chunk_to_json",
    "collect",
    "dump_jsonl",
    "load_golden",
    "load_jsonl",
    "load_plugins",
    "use_cassette",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
