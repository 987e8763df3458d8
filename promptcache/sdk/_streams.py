"""Stream proxies: the SDK's own events, unchanged, with usage recorded when the stream ends.

A proxy wraps one SDK stream object (``anthropic.Stream`` / ``AsyncStream``,
``anthropic.lib.streaming.MessageStream`` and its manager, ``openai.Stream`` /
``AsyncStream``, ``openai.lib.streaming.chat.ChatCompletionStream`` and
``openai.lib.streaming.responses.ResponseStream`` and their managers, and the async twins of
each). It yields exactly the events the SDK yields, passes every other attribute through
(``response``, ``request_id``, ``text_stream``, ``current_completion_snapshot``, ...) and
reports ``isinstance`` as the SDK class. Usage is recorded once, at the first of:

- the last event (iteration ends);
- ``close()`` or leaving a ``with`` / ``async with`` block;
- an early ``break`` out of ``for event in stream`` (CPython closes the loop's iterator at
  once; for ``async for`` the event loop closes it soon after);
- ``get_final_message()`` / ``get_final_text()`` / ``until_done()`` (Anthropic
  ``MessageStream``: the usage comes from the SDK's accumulated message snapshot, so it is the
  same record a non-streamed call of the same request gives);
- ``get_final_completion()`` / ``get_final_response()`` / ``until_done()`` (OpenAI
  ``ChatCompletionStream`` / ``ResponseStream``: the proxy reads the rest of the stream through
  itself, so the usage chunk / ``response.completed`` event is seen as in a loop, then returns
  the SDK's own final object). A ``ChatCompletionStream`` yields helper events; the usage and
  the first token are read from its ``chunk`` events (the raw chunks).

A stream dropped before any of these (``create(stream=True)`` never read to its end nor
closed, then garbage-collected; the request was sent and billed) is recorded at the start of
the next observed call, when the client's tracker is asked for (``tracker_of``) or its
results are read (``summary()``, ``records``, ``events``...), and at exit, from the events read
before it was dropped, else as unknown with a one-time warning.

A stream that carried no usage (an OpenAI chat stream without
``stream_options={"include_usage": True}``, or one left before its usage event) is recorded
with unknown (``None``) counts and a one-time warning. The proxy never adds ``include_usage``
itself: that would add a chunk to the caller's stream.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from promptcache.sdk._observe import (
    _USAGE_FORMAT,
    DROPPED_HOW,
    DROPPED_STREAMS,
    Call,
    Observer,
    fault,
)

__all__ = [
    "AsyncChatCompletionStreamManagerProxy",
    "AsyncChatCompletionStreamProxy",
    "AsyncMessageStreamManagerProxy",
    "AsyncMessageStreamProxy",
    "AsyncResponseStreamManagerProxy",
    "AsyncResponseStreamProxy",
    "AsyncStreamProxy",
    "ChatCompletionStreamManagerProxy",
    "ChatCompletionStreamProxy",
    "MessageStreamManagerProxy",
    "MessageStreamProxy",
    "ResponseStreamManagerProxy",
    "ResponseStreamProxy",
    "StreamProxy",
    "is_token_event",
]

#: Event types that arrive before any generated token (no cache read is possible earlier
#: than the first token: https://platform.claude.com/docs/en/build-with-claude/prompt-caching).
_PRELUDE_TYPES = frozenset({
    "message_start", "ping", "content_block_start",
    "response.created", "response.in_progress", "response.queued",
    "response.output_item.added", "response.content_part.added",
})


def is_token_event(event: Any) -> bool:
    """Whether a streamed event carries (or follows) the first generated token.

    Anthropic: any event but ``message_start`` / ``ping`` / ``content_block_start``. OpenAI
    Responses: any event but the ``created`` / ``in_progress`` / ``added`` prelude. OpenAI chat
    chunks: a delta with content, a tool call or a refusal, a finish reason, or usage.
    """
    kind = getattr(event, "type", None)
    if isinstance(kind, str):
        return kind not in _PRELUDE_TYPES
    choices = getattr(event, "choices", None)
    if choices is None:
        return True
    for choice in choices:
        delta = getattr(choice, "delta", None)
        if getattr(choice, "finish_reason", None) is not None:
            return True
        if delta is not None and (getattr(delta, "content", None) or
                                  getattr(delta, "tool_calls", None) or
                                  getattr(delta, "refusal", None)):
            return True
    return getattr(event, "usage", None) is not None


class _Tap:
    """Accumulates one stream's usage and records it once."""

    __slots__ = ("acc", "call", "done", "first_token", "obs")

    def __init__(self, obs: Observer | None, call: Call | None) -> None:
        self.obs = obs
        self.call = call
        self.first_token: float | None = None
        self.done = obs is None or call is None
        self.acc: Any = None
        if obs is not None and call is not None:
            try:
                from promptcache.usage import StreamUsage

                self.acc = StreamUsage(_USAGE_FORMAT[call.shape], **obs.stream_fields(call))
            except Exception as exc:
                fault("stream usage set-up", exc, "the stream is returned unobserved")

    def feed(self, event: Any) -> None:
        if self.first_token is None and is_token_event(event):
            self.first_token = time.time()
        if self.done or self.acc is None:
            return
        try:
            self.acc.feed(event)
        except Exception as exc:
            fault("reading a streamed event's usage", exc, "the stream goes on")
            self.acc = None

    def finish(self, how: str, snapshot: Any = None, end: float | None = None) -> None:
        if self.done:
            return
        self.done = True
        obs, call = self.obs, self.call
        assert obs is not None and call is not None
        if end is None:
            end = time.time()
        try:
            if (snapshot is not None and how not in _CUT_SHORT
                    and getattr(snapshot, "usage", None) is not None):
                # the SDK's accumulated message: complete only when the stream was read to its
                # end (left early, its usage still holds message_start's placeholder output
                # count: the events read so far decide, below; new-user trial 16)
                obs.record_response(call, snapshot, end, self.first_token)
                return
            if self.acc is not None and self.acc.seen_usage:
                rec = self.acc.record()
                update: dict[str, Any] = {"end": end}
                if self.first_token is not None:
                    update["first_token"] = self.first_token
                obs.add(rec.model_copy(update=update), call)
                return
            if how == "end" and call.shape == "openai-chat":
                why = ("an OpenAI chat stream carries usage only with stream_options="
                       "{'include_usage': True}; the wrapper does not add it")
            else:
                why = f"the stream was {how} before its usage arrived"
                if how == DROPPED_HOW:
                    why += ": close a stream you do not read to its end, or use it in a with block"
            obs.warn_once(f"stream-usage:{call.shape}:{how}",
                          f"promptcache: streamed usage unknown ({why}); recorded as unknown")
            obs.add(obs.unknown_record(call, end, self.first_token, "stream_usage_missing"))
        except Exception as exc:
            fault("stream usage tracking", exc, "the stream goes on")


#: How a stream ends before it is read through (see ``_Base._pc_finish``'s callers).
_CUT_SHORT = frozenset({"left early", "closed", "interrupted by an error"})


class _ChunkTap(_Tap):
    """Tap of an OpenAI ``ChatCompletionStream``: its ``chunk`` events carry the raw chunks
    (usage, first token); the other helper events (``content.delta``, ...) repeat them."""

    __slots__ = ()

    def feed(self, event: Any) -> None:
        if getattr(event, "type", None) == "chunk":
            chunk = getattr(event, "chunk", None)
            if chunk is not None:
                super().feed(chunk)


class _Base:
    __slots__ = ("_pc_buffer", "_pc_tap", "_pc_target")

    _pc_tap_cls: type[_Tap] = _Tap

    def __init__(self, target: Any, obs: Observer | None = None, call: Call | None = None
                 ) -> None:
        object.__setattr__(self, "_pc_target", target)
        object.__setattr__(self, "_pc_tap", self._pc_tap_cls(obs, call))
        object.__setattr__(self, "_pc_buffer", deque())

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(proxy, SDK stream class) holds
        return type(self._pc_target)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pc_target, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._pc_target, name, value)

    def __dir__(self) -> list[str]:
        return dir(self._pc_target)

    def __repr__(self) -> str:
        return f"<promptcache stream {self._pc_target!r}>"

    def _pc_snapshot(self) -> Any:
        return None

    def _pc_finish(self, how: str) -> None:
        self._pc_tap.finish(how, self._pc_snapshot())

    def __del__(self) -> None:
        # dropped before its usage was recorded (never read to its end, closed or left):
        # queued, recorded at the next observed call (not here: a finaliser may run inside
        # any code, a tracker's lock held included; new-user trial 23)
        try:
            tap = self._pc_tap
            if not tap.done:
                DROPPED_STREAMS.append((tap, time.time()))
        except Exception:  # interpreter shutdown: the module's globals may be gone
            pass


class StreamProxy(_Base):
    """Proxy of a sync SDK stream (``anthropic.Stream``, ``openai.Stream``)."""

    __slots__ = ()

    def _pc_fetch(self) -> Any:
        try:
            event = next(self._pc_target)
        except StopIteration:
            self._pc_finish("end")
            raise
        except BaseException:
            self._pc_finish("interrupted by an error")
            raise
        self._pc_tap.feed(event)
        return event

    def _pc_pull(self) -> Any:
        if self._pc_buffer:
            return self._pc_buffer.popleft()
        return self._pc_fetch()

    def __next__(self) -> Any:
        return self._pc_pull()

    def __iter__(self) -> Any:
        def events() -> Any:
            finished = False
            try:
                while True:
                    try:
                        event = self._pc_pull()
                    except StopIteration:
                        finished = True
                        return
                    yield event
            finally:
                if not finished:
                    self._pc_finish("left early")

        return events()

    def __enter__(self) -> Any:
        self._pc_target.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._pc_target.__exit__(*exc)
        finally:
            self._pc_finish("closed")

    def close(self) -> None:
        """Close the SDK stream (records the usage seen so far)."""
        try:
            self._pc_target.close()
        finally:
            self._pc_finish("closed")

    def _pc_wait_first_token(self) -> None:
        """Read ahead (buffering, so the caller still sees every event) until the first
        generated token or the end of the stream."""
        while self._pc_tap.first_token is None:
            try:
                self._pc_buffer.append(self._pc_fetch())
            except StopIteration:
                return


class MessageStreamProxy(StreamProxy):
    """Proxy of ``anthropic.lib.streaming.MessageStream`` (what ``messages.stream()`` yields)."""

    __slots__ = ()

    def _pc_snapshot(self) -> Any:
        try:
            return self._pc_target.current_message_snapshot
        except Exception:  # no message_start yet
            return None

    def get_final_message(self) -> Any:
        """The SDK's ``get_final_message()``; records the usage of the final message."""
        try:
            return self._pc_target.get_final_message()
        finally:
            self._pc_finish("read to its final message")

    def get_final_text(self) -> str:
        """The SDK's ``get_final_text()``; records the usage of the final message."""
        try:
            text: str = self._pc_target.get_final_text()
            return text
        finally:
            self._pc_finish("read to its final message")

    def until_done(self) -> None:
        """The SDK's ``until_done()``; records the usage of the final message."""
        try:
            self._pc_target.until_done()
        finally:
            self._pc_finish("read to its end")


class _FinalStreamProxy(StreamProxy):
    """An OpenAI helper stream (``ChatCompletionStream``, ``ResponseStream``): its final
    object is read after the proxy itself has read the stream to its end."""

    __slots__ = ()

    def _pc_drain(self) -> None:
        for _ in self:
            pass

    def until_done(self) -> Any:
        """The SDK's ``until_done()`` (read through the proxy: records the usage); the proxy."""
        try:
            self._pc_drain()
            self._pc_target.until_done()
        finally:
            self._pc_finish("end")
        return self

    def _pc_final(self, name: str) -> Any:
        try:
            self._pc_drain()
            return getattr(self._pc_target, name)()
        finally:
            self._pc_finish("end")


class ChatCompletionStreamProxy(_FinalStreamProxy):
    """Proxy of ``openai.lib.streaming.chat.ChatCompletionStream``
    (``chat.completions.stream()``)."""

    __slots__ = ()
    _pc_tap_cls = _ChunkTap

    def get_final_completion(self) -> Any:
        """The SDK's ``get_final_completion()``; records the stream's usage first."""
        return self._pc_final("get_final_completion")


class ResponseStreamProxy(_FinalStreamProxy):
    """Proxy of ``openai.lib.streaming.responses.ResponseStream`` (``responses.stream()``)."""

    __slots__ = ()

    def get_final_response(self) -> Any:
        """The SDK's ``get_final_response()``; records the stream's usage first."""
        return self._pc_final("get_final_response")


class _StreamManagerProxy(_Base):
    """Proxy of a helper's stream manager: ``with manager as stream`` sends the request and
    yields the stream, here wrapped in ``_pc_stream_cls``; leaving the block records it."""

    __slots__ = ("_pc_call", "_pc_obs", "_pc_stream")

    _pc_stream_cls: type[StreamProxy] = StreamProxy

    def __init__(self, target: Any, obs: Observer, call: Call) -> None:
        super().__init__(target)
        object.__setattr__(self, "_pc_obs", obs)
        object.__setattr__(self, "_pc_call", call)
        object.__setattr__(self, "_pc_stream", None)

    def __enter__(self) -> Any:
        self._pc_call.start = time.time()
        stream = self._pc_stream_cls(self._pc_target.__enter__(), self._pc_obs, self._pc_call)
        object.__setattr__(self, "_pc_stream", stream)
        return stream

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._pc_target.__exit__(*exc)
        finally:
            if self._pc_stream is not None:
                self._pc_stream._pc_finish("closed")


class MessageStreamManagerProxy(_StreamManagerProxy):
    """Proxy of ``anthropic.lib.streaming.MessageStreamManager`` (``messages.stream()``)."""

    __slots__ = ()
    _pc_stream_cls = MessageStreamProxy


class ChatCompletionStreamManagerProxy(_StreamManagerProxy):
    """Proxy of ``openai.lib.streaming.chat.ChatCompletionStreamManager``."""

    __slots__ = ()
    _pc_stream_cls = ChatCompletionStreamProxy


class ResponseStreamManagerProxy(_StreamManagerProxy):
    """Proxy of ``openai.lib.streaming.responses.ResponseStreamManager``."""

    __slots__ = ()
    _pc_stream_cls = ResponseStreamProxy


class AsyncStreamProxy(_Base):
    """Proxy of an async SDK stream (``anthropic.AsyncStream``, ``openai.AsyncStream``)."""

    __slots__ = ()

    async def _pc_fetch(self) -> Any:
        try:
            event = await self._pc_target.__anext__()
        except StopAsyncIteration:
            self._pc_finish("end")
            raise
        except BaseException:
            self._pc_finish("interrupted by an error")
            raise
        self._pc_tap.feed(event)
        return event

    async def _pc_pull(self) -> Any:
        if self._pc_buffer:
            return self._pc_buffer.popleft()
        return await self._pc_fetch()

    async def __anext__(self) -> Any:
        return await self._pc_pull()

    def __aiter__(self) -> Any:
        async def events() -> Any:
            finished = False
            try:
                while True:
                    try:
                        event = await self._pc_pull()
                    except StopAsyncIteration:
                        finished = True
                        return
                    yield event
            finally:
                if not finished:
                    self._pc_finish("left early")

        return events()

    async def __aenter__(self) -> Any:
        await self._pc_target.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._pc_target.__aexit__(*exc)
        finally:
            self._pc_finish("closed")

    async def close(self) -> None:
        """Close the SDK stream (records the usage seen so far)."""
        try:
            await self._pc_target.close()
        finally:
            self._pc_finish("closed")

    async def _pc_wait_first_token(self) -> None:
        """Async twin of :meth:`StreamProxy._pc_wait_first_token`."""
        while self._pc_tap.first_token is None:
            try:
                self._pc_buffer.append(await self._pc_fetch())
            except StopAsyncIteration:
                return


class AsyncMessageStreamProxy(AsyncStreamProxy):
    """Proxy of ``anthropic.lib.streaming.AsyncMessageStream``."""

    __slots__ = ()

    def _pc_snapshot(self) -> Any:
        try:
            return self._pc_target.current_message_snapshot
        except Exception:
            return None

    async def get_final_message(self) -> Any:
        """The SDK's ``get_final_message()``; records the usage of the final message."""
        try:
            return await self._pc_target.get_final_message()
        finally:
            self._pc_finish("read to its final message")

    async def get_final_text(self) -> str:
        """The SDK's ``get_final_text()``; records the usage of the final message."""
        try:
            text: str = await self._pc_target.get_final_text()
            return text
        finally:
            self._pc_finish("read to its final message")

    async def until_done(self) -> None:
        """The SDK's ``until_done()``; records the usage of the final message."""
        try:
            await self._pc_target.until_done()
        finally:
            self._pc_finish("read to its end")


class _AsyncFinalStreamProxy(AsyncStreamProxy):
    """Async twin of :class:`_FinalStreamProxy`."""

    __slots__ = ()

    async def _pc_drain(self) -> None:
        async for _ in self:
            pass

    async def until_done(self) -> Any:
        """The SDK's ``until_done()`` (read through the proxy: records the usage); the proxy."""
        try:
            await self._pc_drain()
            await self._pc_target.until_done()
        finally:
            self._pc_finish("end")
        return self

    async def _pc_final(self, name: str) -> Any:
        try:
            await self._pc_drain()
            return await getattr(self._pc_target, name)()
        finally:
            self._pc_finish("end")


class AsyncChatCompletionStreamProxy(_AsyncFinalStreamProxy):
    """Proxy of ``openai.lib.streaming.chat.AsyncChatCompletionStream``."""

    __slots__ = ()
    _pc_tap_cls = _ChunkTap

    async def get_final_completion(self) -> Any:
        """The SDK's ``get_final_completion()``; records the stream's usage first."""
        return await self._pc_final("get_final_completion")


class AsyncResponseStreamProxy(_AsyncFinalStreamProxy):
    """Proxy of ``openai.lib.streaming.responses.AsyncResponseStream``."""

    __slots__ = ()

    async def get_final_response(self) -> Any:
        """The SDK's ``get_final_response()``; records the stream's usage first."""
        return await self._pc_final("get_final_response")


class _AsyncStreamManagerProxy(_Base):
    """Async twin of :class:`_StreamManagerProxy`."""

    __slots__ = ("_pc_call", "_pc_obs", "_pc_stream")

    _pc_stream_cls: type[AsyncStreamProxy] = AsyncStreamProxy

    def __init__(self, target: Any, obs: Observer, call: Call) -> None:
        super().__init__(target)
        object.__setattr__(self, "_pc_obs", obs)
        object.__setattr__(self, "_pc_call", call)
        object.__setattr__(self, "_pc_stream", None)

    async def __aenter__(self) -> Any:
        self._pc_call.start = time.time()
        stream = self._pc_stream_cls(await self._pc_target.__aenter__(), self._pc_obs,
                                     self._pc_call)
        object.__setattr__(self, "_pc_stream", stream)
        return stream

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._pc_target.__aexit__(*exc)
        finally:
            if self._pc_stream is not None:
                self._pc_stream._pc_finish("closed")


class AsyncMessageStreamManagerProxy(_AsyncStreamManagerProxy):
    """Proxy of ``anthropic.lib.streaming.AsyncMessageStreamManager``."""

    __slots__ = ()
    _pc_stream_cls = AsyncMessageStreamProxy


class AsyncChatCompletionStreamManagerProxy(_AsyncStreamManagerProxy):
    """Proxy of ``openai.lib.streaming.chat.AsyncChatCompletionStreamManager``."""

    __slots__ = ()
    _pc_stream_cls = AsyncChatCompletionStreamProxy


class AsyncResponseStreamManagerProxy(_AsyncStreamManagerProxy):
    """Proxy of ``openai.lib.streaming.responses.AsyncResponseStreamManager``."""

    __slots__ = ()
    _pc_stream_cls = AsyncResponseStreamProxy
