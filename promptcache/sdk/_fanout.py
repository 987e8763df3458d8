"""Warm-then-fan-out: one request writes the shared prefix, the rest read it.

An Anthropic cache entry becomes readable only once the response that writes it begins
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching), so N requests sent
together on a cold cache each pay the cache write (case BR-21). Sending one first and releasing
the others when its first token arrives turns N-1 writes into reads;
:func:`promptcache.planner.fanout_cost` prices the difference and
:func:`promptcache.planner.should_warm_first` says when it pays.

::

    time ──────────────────────────────────────────────►
    call 0  |== prefill (write) ==|tok tok tok ...
    call 1                         |= read =|tok ...      released at call 0's first token
    call 2                         |= read =|tok ...      (or its whole response when it is
    ...                                                   not streamed)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from promptcache.sdk._streams import AsyncStreamProxy, StreamProxy

__all__ = ["awarm_then_fanout", "warm_then_fanout"]


def _is_manager(result: Any) -> bool:
    # the SDK's managers, and the wrapper's proxies of them (new-user trial 11: a wrapped
    # client's messages.stream slipped through and nothing was sent)
    return type(result).__name__.endswith(("StreamManager", "StreamManagerProxy"))


def _check_calls(calls: Any, name: str) -> list[Any]:
    """``calls`` as a list, checked before anything is sent.

    Raises:
        TypeError: ``calls`` is not a sequence of callables (e.g. the method itself, or
            responses already received).
    """
    if not isinstance(calls, Sequence) or isinstance(calls, (str, bytes)):
        raise TypeError(f"{name}: calls must be a sequence of zero-argument callables (e.g. "
                        f"functools.partial(client.messages.create, ...)), not "
                        f"{type(calls).__name__}")
    for i, call in enumerate(calls):
        if not callable(call):
            raise TypeError(f"{name}: calls[{i}] is a {type(call).__name__}, not a "
                            "zero-argument callable that sends the request")
    return list(calls)


def _manager_error(result: Any) -> TypeError:
    return TypeError(
        f"warm_then_fanout: call 0 returned a {type(result).__name__.removesuffix('Proxy')}, "
        "which sends its request "
        "only when entered; use messages.create(..., stream=True) in fan-out calls")


def _wait_first_token_sync(result: Any) -> Any:
    """Block until ``result`` (a response or a stream) has its first token; return what the
    caller should get (a raw SDK stream comes back inside a buffering proxy)."""
    if _is_manager(result):
        raise _manager_error(result)
    if isinstance(result, StreamProxy) and type.__instancecheck__(StreamProxy, result):
        result._pc_wait_first_token()
        return result
    if hasattr(result, "__next__") and hasattr(result, "response"):  # an unwrapped SDK stream
        proxy = StreamProxy(result)
        proxy._pc_wait_first_token()
        return proxy
    return result


def warm_then_fanout(calls: Sequence[Callable[[], Any]], *, max_workers: int | None = None,
                     return_exceptions: bool = False) -> list[Any]:
    """Send ``calls[0]``, wait for its response or first streamed token, then the rest at once.

    Example::

        client = promptcache.wrap(anthropic.Anthropic())
        calls = [functools.partial(client.messages.create, **shared, messages=m) for m in batch]
        responses = warm_then_fanout(calls)

    Args:
        calls: zero-argument callables that each send one request (``messages.create``,
            ``chat.completions.create``, ``responses.create``; streamed or not) and return
            the SDK's response or stream.
        max_workers: threads for the fan-out (default: one per remaining call, at most 32).
        return_exceptions: put a call's exception in its result slot instead of raising it.

    Returns:
        The results in ``calls`` order. A stream that was read ahead to its first token is
        returned inside a proxy that replays the buffered events first, so the caller still
        sees every event.

    Raises:
        TypeError: ``calls`` is not a sequence of callables (checked before anything is
            sent), or a call returned a ``messages.stream()`` manager, the SDK's or a wrapped
            client's (it has not sent anything yet); use ``messages.create(stream=True)``.
        Exception: the first call's exception (nothing else is sent), or, unless
            ``return_exceptions``, the first exception of the fan-out (after all calls ended).
    """
    calls = _check_calls(calls, "warm_then_fanout")
    if not calls:
        return []
    first = _wait_first_token_sync(calls[0]())
    rest = list(calls[1:])
    results: list[Any] = [first]
    if not rest:
        return results
    workers = max_workers or min(len(rest), 32)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="promptcache-fanout") as pool:
        futures = [pool.submit(c) for c in rest]
        errors: list[BaseException] = []
        for fut in futures:
            exc = fut.exception()
            if exc is None:
                results.append(fut.result())
            elif return_exceptions:
                results.append(exc)
            else:
                errors.append(exc)
                results.append(exc)
    if errors:
        raise errors[0]
    return results


async def _wait_first_token_async(result: Any) -> Any:
    if _is_manager(result):
        raise _manager_error(result)
    if isinstance(result, AsyncStreamProxy) and type.__instancecheck__(AsyncStreamProxy, result):
        await result._pc_wait_first_token()
        return result
    if hasattr(result, "__anext__") and hasattr(result, "response"):
        proxy = AsyncStreamProxy(result)
        await proxy._pc_wait_first_token()
        return proxy
    return result


async def awarm_then_fanout(calls: Sequence[Callable[[], Awaitable[Any]]], *,
                            return_exceptions: bool = False) -> list[Any]:
    """Async :func:`warm_then_fanout`: await ``calls[0]()`` (up to its first streamed token),
    then gather the rest.

    Args:
        calls: zero-argument callables returning awaitables (``lambda: client.messages.create(
            ...)`` on an async client).
        return_exceptions: as in :func:`asyncio.gather`.

    Returns:
        The results in ``calls`` order (streams read ahead come back in a replaying proxy).

    Raises:
        TypeError: a call returned a stream manager (see :func:`warm_then_fanout`).
        Exception: the first call's exception, or the fan-out's first exception unless
            ``return_exceptions``.
    """
    calls = _check_calls(calls, "awarm_then_fanout")
    if not calls:
        return []
    first = await _wait_first_token_async(await calls[0]())
    rest = await asyncio.gather(*(c() for c in calls[1:]), return_exceptions=return_exceptions)
    return [first, *rest]
