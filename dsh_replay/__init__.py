"""dsh-replay: record-and-replay testing for LLM provider adapters of the dsh harness.

Chunks and blocks are the StreamChunk protocol; the validator checks rules
P1-P12; goldens are JSONL; cassettes keep streamed responses fragment by
fragment. See README.md.
"""

from __future__ import annotations

from ._version import __version__ as __version__
from .cassette.pacing import Fault, Fragmentation
from .cassette.secrets import Scrubber
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
