"""Turn a provider's event order into strictly sequential StreamChunk blocks.

Providers interleave: OpenAI streams fragments of parallel tool calls by
``index`` in any order, text can arrive after a tool call has started, and
Anthropic opens blocks by position. The harness needs one block at a time.

Theory of operation
-------------------
Each provider *item* (a text run, a reasoning run, one tool call) is known by
a key the adapter chooses (``("tool", 2)``, ``"text"``…). Exactly one item is
*current*: it has a block index and its pieces are emitted as deltas as soon
as they arrive. Items that show up while the current one is still open wait in
a queue, in order of first appearance, buffering their pieces. When the
current item ends, the next queued one is opened and its buffer released.

Text and reasoning runs end implicitly as soon as another item appears (the
provider has moved on); a tool call ends only when the adapter says so
(``end``) or at ``finish`` — its fragments may still be coming. Because
indexes are assigned when a block opens, they run 0, 1, 2… in emission order,
``block-end`` carries the exact concatenation, and ``finish`` comes last after
``usage``. An adapter that routes every piece through here cannot break P2-P12.

Two decisions are taken here, once for every route, and never by an adapter:

- **The finish kind (P10).** ``finish`` is ``tool-calls`` if and only if a
  tool-call block was emitted, whatever the provider said: Gemini (native and
  its OpenAI-compatible endpoint) and Ollama say ``STOP``/``stop`` after a
  tool call, and a ``tool_calls`` reason with no call left is a ``stop``. The
  provider's own word is kept in ``raw``.
- **Ids for calls that come without one.** Gemini and Ollama send no call id,
  and Gemini's OpenAI-compatible endpoint sends ``"id": ""``. The id of a call
  arrives with (or before) its name on every wire seen, so a call whose name
  arrives while it has no id gets :func:`derived_call_id` — ``call_{n}_{name}``,
  ``n`` being its 0-based position among the response's tool calls: the same
  body always gives the same ids, and they are unique within one response.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from ..errors import MalformedStreamError
from ..protocol.chunks import (
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

__all__ = ["BlockSequencer", "derived_call_id"]


def derived_call_id(position: int, name: str) -> str:
    """The id of a call the provider sent without one: stable across replays of one body.

    ``position`` is the call's 0-based position among the response's tool calls.
    """
    return f"call_{position}_{name}"


#: pieces an item keeps as they came before folding them into its UTF-8 (see ``_Item.folded``): a
#: block of fewer (nearly all) is joined once, as before; folding costs an encoding and a decoding
_FOLD_AT = 4096


@dataclass(slots=True, eq=False)
class _Item:
    key: Hashable
    kind: str  # "text" | "reasoning" | "tool-call"
    parts: list[str] = field(default_factory=list)  # the pieces since the last fold, for block-end
    #: the pieces before ``parts``, joined as UTF-8 (``surrogatepass``: a piece may hold half a surrogate
    #: pair); None until an item has had ``_FOLD_AT``. A 200 MB body's text run is 1.5 M pieces: kept as
    #: str objects until block-end, ~60 bytes each; folded, 1-4 bytes a character, decoded once at the end.
    folded: bytearray | None = None
    pending: list[str] = field(default_factory=list)  # pieces not yet emitted
    index: int | None = None
    ended: bool = False
    call_id: str = ""
    name: str = ""
    signature: str | None = None
    position: int = 0  # among the response's tool calls, in order of first appearance

    @property
    def ready(self) -> bool:
        return self.kind != "tool-call" or bool(self.call_id and self.name)

    def fold(self) -> None:
        utf8 = "".join(self.parts).encode("utf-8", "surrogatepass")
        if self.folded is None:
            self.folded = bytearray(utf8)
        else:
            self.folded += utf8
        self.parts.clear()

    def joined(self) -> str:
        """Every piece, in order."""
        if self.folded is None:
            return "".join(self.parts)
        self.fold()
        assert self.folded is not None
        text, self.folded = self.folded.decode("utf-8", "surrogatepass"), None
        return text


class BlockSequencer:
    """Collects provider pieces and returns the chunks to yield, in protocol order.

    Every method returns the list of chunks that became ready (often empty); a
    translator returns them from ``event``. Keys are the adapter's own names
    for provider items (any hashable: ``("tool", 0)``, ``"plan"``), so pieces of
    interleaved items land in the right block.

    Example::

        seq = BlockSequencer()
        seq.text("Hel")                 # -> [BlockStart(0, text), TextDelta(0, "Hel")]
        seq.tool_call(("tool", 0), call_id="call_1", name="get_weather")
        #                               # -> [BlockEnd(0, TextBlock("Hel")), BlockStart(1, tool-call)]
        seq.tool_call(("tool", 0), arguments='{"city": "Paris"}')   # -> [ToolCallDelta(1, ...)]
        seq.end(("tool", 0))            # -> [BlockEnd(1, ToolCallBlock(...))]
        seq.finish(usage=Usage(input_tokens=9, output_tokens=7), raw_reason="TOOL_CALL")
        #                               # -> [UsageChunk(...), Finish(tool-calls, raw="TOOL_CALL")]
    """

    def __init__(self, *, drop_reasoning: bool = False) -> None:
        self.drop_reasoning = drop_reasoning
        self._current: _Item | None = None
        self._queue: list[_Item] = []
        self._live: dict[Hashable, _Item] = {}
        self._next_index = 0
        self._tool_blocks = 0
        self._tool_items = 0
        self._ended_calls: set[Hashable] = set()
        self._call_ids: set[str] = set()
        self._finished = False
        self._out: list[StreamChunk] = []

    @property
    def tool_calls_emitted(self) -> int:
        return self._tool_blocks

    # -- pieces ----------------------------------------------------------------------

    def text(self, text: str, *, key: Hashable = "text") -> list[StreamChunk]:
        """A piece of answer text for item ``key`` (one text block per key).

        Text ends implicitly when another item appears. ``seq.text("Hi", key=("text", 0))``.
        """
        if text:
            self._piece(self._item(key, "text"), text)
        return self._take()

    def reasoning(self, text: str, *, key: Hashable = "reasoning", signature: str | None = None) -> list[StreamChunk]:
        """A piece of reasoning text (and/or its signature); dropped when ``drop_reasoning``.

        ``seq.reasoning("Let me think", key="thinking")``; a signature arriving later
        rides on the same key: ``seq.reasoning("", key="thinking", signature="sig…")``.
        """
        if self.drop_reasoning:
            return self._take()
        if text:
            self._piece(self._item(key, "reasoning"), text)
        if signature:
            item = self._lookup(key)
            # a signature with no reasoning text (redacted thinking) has no block to ride on:
            # an empty reasoning block would break P6
            if item is not None and item.kind == "reasoning":
                item.signature = (item.signature or "") + signature
        return self._take()

    def tool_call(
        self,
        key: Hashable,
        *,
        call_id: str | None = None,
        name: str | None = None,
        arguments: str = "",
    ) -> list[StreamChunk]:
        """A fragment of tool call ``key``: its id and name when first known, raw argument text.

        ``None`` or ``""`` means "not in this fragment". A call named while it has
        no id gets :func:`derived_call_id` (see the module docstring). The block
        opens once id and name are known; argument text that came before is kept.

        Example: ``seq.tool_call(("tool", 0), call_id="call_1", name="get_weather")``,
        then ``seq.tool_call(("tool", 0), arguments='{"city":')`` for each fragment.
        """
        item = self._item(key, "tool-call")
        became_ready = False
        if call_id and not item.call_id:
            item.call_id = call_id
            became_ready = item.ready
        # continuation fragments may carry "name": "" — the first name stands
        if name and not item.name:
            item.name = name
            if not item.call_id:
                item.call_id = derived_call_id(item.position, name)
            became_ready = item.ready
        if arguments:
            self._piece(item, arguments)
        if became_ready:
            self._advance()
        return self._take()

    def end(self, key: Hashable) -> list[StreamChunk]:
        """The provider says item ``key`` is complete: ``seq.end(("tool", 0))``.

        Closes the block now when it is current (so the next queued item opens),
        or as soon as it becomes current. An unknown or already-ended key is a no-op.
        """
        item = self._lookup(key)
        if item is not None:
            item.ended = True
            self._advance()
        return self._take()

    def end_all(self) -> list[StreamChunk]:
        """Close every item (e.g. at the end of a provider message)."""
        self._end_all()
        return self._take()

    def _end_all(self) -> None:
        for item in [self._current, *self._queue]:
            if item is not None:
                item.ended = True
        self._advance()

    @property
    def finished(self) -> bool:
        """Whether :meth:`finish` has emitted ``usage`` and ``finish``: the stream is complete."""
        return self._finished

    def finish(self, *, usage: Usage, raw_reason: str | None = None) -> list[StreamChunk]:
        """Close everything still open, then emit ``usage`` and ``finish``.

        Call it once, on the provider's terminal event (a translator may call
        ``self.finish(...)`` or ``self.seq.finish(...)``: either completes the stream). The
        finish kind is ``tool-calls`` exactly when a tool-call block was emitted;
        ``raw_reason`` keeps the provider's word. Example:
        ``seq.finish(usage=Usage(input_tokens=9, output_tokens=7), raw_reason="COMPLETE")``.
        """
        if self._finished:
            # a second usage + finish would break P8, P9 and P11
            raise MalformedStreamError("the generation already finished; finish() may be called once")
        self._end_all()
        blocked = [item for item in self._queue if not item.ready]
        if blocked or (self._current is not None):
            item = blocked[0] if blocked else self._current
            assert item is not None
            raise MalformedStreamError(
                f"tool call {item.key!r} never received its "
                f"{'id' if not item.call_id else 'name'}; cannot emit it"
            )
        self._out.append(UsageChunk(usage=usage))
        # P10, for every route: the blocks decide, the provider's reason is only kept as raw
        self._out.append(
            Finish(reason=FinishReason(kind="tool-calls" if self._tool_blocks else "stop", raw=raw_reason))
        )
        self._finished = True
        return self._take()

    # -- machinery ---------------------------------------------------------------------

    def _take(self) -> list[StreamChunk]:
        out, self._out = self._out, []
        return out

    def _lookup(self, key: Hashable) -> _Item | None:
        # checked lazily, where a bad key first fails: this runs once per provider event
        try:
            return self._live.get(key)
        except TypeError:
            raise TypeError(
                f"key must be hashable (a str, an int or a tuple of them), got {type(key).__name__} {key!r:.60}"
            ) from None

    def _item(self, key: Hashable, kind: str) -> _Item:
        item = self._lookup(key)
        if item is not None and item.kind == kind:
            return item
        if self._finished:
            raise MalformedStreamError(f"content for {key!r} arrived after the generation finished")
        if kind == "tool-call" and key in self._ended_calls:
            # a second block for one call would repeat its id (P12)
            raise MalformedStreamError(f"tool call {key!r} received more content after it ended")
        item = _Item(key=key, kind=kind)
        if kind == "tool-call":
            item.position = self._tool_items
            self._tool_items += 1
        self._live[key] = item
        current = self._current
        if current is not None and current.kind != "tool-call":
            current.ended = True  # a text/reasoning run ends when the provider moves on
        self._queue.append(item)
        self._advance()
        return item

    def _piece(self, item: _Item, text: str) -> None:
        parts = item.parts
        parts.append(text)
        if len(parts) >= _FOLD_AT:
            item.fold()
        if item is self._current:
            self._out.append(self._delta(item, text))
        else:
            item.pending.append(text)

    def _advance(self) -> None:
        while True:
            current = self._current
            if current is not None:
                if not current.ended:
                    return
                self._close(current)
            if not self._queue or not self._queue[0].ready:
                return
            self._open(self._queue.pop(0))

    def _open(self, item: _Item) -> None:
        item.index = self._next_index
        self._next_index += 1
        self._current = item
        if item.kind == "tool-call":
            if item.call_id in self._call_ids:
                raise MalformedStreamError(f"tool call id {item.call_id!r} is used by two calls of one response")
            self._call_ids.add(item.call_id)
            self._tool_blocks += 1
        self._out.append(BlockStart(index=item.index, block_type=item.kind))  # type: ignore[arg-type]
        for text in item.pending:
            self._out.append(self._delta(item, text))
        item.pending.clear()

    def _delta(self, item: _Item, text: str) -> StreamChunk:
        assert item.index is not None
        if item.kind == "text":
            return TextDelta(index=item.index, text=text)
        if item.kind == "reasoning":
            return ReasoningDelta(index=item.index, text=text)
        return ToolCallDelta(index=item.index, id=CallId(item.call_id), name=item.name, arguments_delta=text)

    def _close(self, item: _Item) -> None:
        assert item.index is not None
        self._current = None
        if self._live.get(item.key) is item:
            del self._live[item.key]
        if item.kind == "tool-call":
            self._ended_calls.add(item.key)
        joined = item.joined()
        if item.kind == "text":
            block: TextBlock | ToolCallBlock | ReasoningBlock = TextBlock(text=joined)
        elif item.kind == "reasoning":
            block = ReasoningBlock(text=joined, signature=item.signature)
        else:
            if not joined:
                # a call with no arguments carries "{}" (P7)
                self._out.append(self._delta(item, "{}"))
                joined = "{}"
            block = ToolCallBlock(id=CallId(item.call_id), name=item.name, arguments=joined)
        self._out.append(BlockEnd(index=item.index, block=block))
