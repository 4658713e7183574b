"""dsh-replay: record-and-replay testing for LLM provider adapters of the dsh harness.

Chunks and blocks are the StreamChunk protocol; the validator checks rules
P1-P12; goldens are JSONL; cassettes keep streamed responses fragment by
fragment. See README.md.
"""

from __future__ import annotations

from ._adapter import LlmAdapter, LlmRegistry
from ._cassette import RecordMode
from ._chunks import (
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
from ._collect import ToolCall, Turn, collect
from ._exceptions import (
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
from ._jsonl import (
    Golden,
    Raised,
    chunk_from_json,
    chunk_to_json,
    dump_jsonl,
    load_golden,
    load_jsonl,
)
from ._ndjson import NDJSONDecoder
from ._options import GenerateOptions, Message, MessageToolCall, ToolDefinition
from ._pacing import Fault, Fragmentation
from ._plugins import PluginContext, load_plugins
from ._secrets import Scrubber
from ._sequencer import BlockSequencer
from ._sse import SSEDecoder, SSEEvent
from ._use_cassette import CassetteSession, use_cassette
from ._validator import SequenceValidator, Violation, assert_chunk_sequence, check_chunk_sequence
from ._version import __version__ as __version__

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
