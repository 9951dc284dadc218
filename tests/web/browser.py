"""Playwright's sync API on a thread of its own (tests/web/conftest.py `browser`).

The sync API runs its event loop in the calling thread's greenlets: while it is up,
that thread has a running asyncio loop, so an asyncio test (or asyncio.run) in the
same thread fails with "cannot be called from a running event loop". Here Playwright
lives on the "playwright" thread for the browser's whole life; the tests hold
`Remote` proxies whose every attribute read and call runs on that thread and waits
for its result (Playwright's objects are bound to the thread that made them). The
main thread never has a loop running, whatever order the tests run in.

Event handlers given to Playwright (`page.on("websocket", fn)`) run on the playwright
thread with Playwright's own objects, when a later call lets its loop run: keep them
to cheap, thread-safe work (appending to a list).
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Optional

CALL_TIMEOUT_S = 300.0  # bounds a wedged browser; every Playwright wait has its own, shorter timeout


class BrowserThread:
    """Chromium launched by Playwright on a thread of its own; `browser` is its Remote.
    Raises what the launch raised (a missing executable, a crash at start)."""

    def __init__(self, executable: str, args: list[str]) -> None:
        self._jobs: "queue.Queue[Optional[tuple[Future, Callable[[], Any]]]]" = queue.Queue()
        started: Future = Future()
        self._thread = threading.Thread(target=self._run, args=(executable, args, started), name="playwright",
                                        daemon=True)
        self._thread.start()
        self.browser: Remote = started.result(CALL_TIMEOUT_S)

    def _run(self, executable: str, args: list[str], started: Future) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=executable, args=args)
                started.set_result(Remote(self, browser))
                while (job := self._jobs.get()) is not None:
                    fut, fn = job
                    if fut.set_running_or_notify_cancel():
                        try:
                            fut.set_result(fn())
                        except BaseException as exc:  # noqa: BLE001 — handed to the waiting test
                            fut.set_exception(exc)
                browser.close()
        except BaseException as exc:  # noqa: BLE001 — a launch failure fails the fixture
            if not started.done():
                started.set_exception(exc)
            else:
                raise

    def call(self, fn: Callable[[], Any]) -> Any:
        """fn() on the playwright thread; its result (Playwright objects as Remote) or its exception."""
        if threading.current_thread() is self._thread:
            return self.wrap(fn())
        fut: Future = Future()
        self._jobs.put((fut, fn))
        return self.wrap(fut.result(CALL_TIMEOUT_S))

    def wrap(self, value: Any) -> Any:
        """A Playwright object as a Remote (lists and tuples element-wise); data as it is."""
        if isinstance(value, (list, tuple)):
            return type(value)(self.wrap(v) for v in value)
        if type(value).__module__.startswith("playwright.") and not isinstance(value, BaseException):
            return Remote(self, value)
        return value

    def close(self) -> None:
        """Close the browser and stop the thread (after the calls already queued)."""
        self._jobs.put(None)
        self._thread.join(60)


def _unwrap(value: Any) -> Any:
    return value._obj if isinstance(value, Remote) else value


class Remote:
    """A Playwright object used from any thread: attribute reads and calls run on the
    playwright thread (BrowserThread.call); Remote arguments are passed as the objects
    they stand for."""

    __slots__ = ("_owner", "_obj")

    def __init__(self, owner: BrowserThread, obj: Any) -> None:
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_obj", obj)

    def __getattr__(self, name: str) -> Any:
        owner, obj = self._owner, self._obj
        value = owner.call(lambda: getattr(obj, name))
        if not callable(value) or isinstance(value, Remote):
            return value

        def method(*args: Any, **kwargs: Any) -> Any:
            args = tuple(_unwrap(a) for a in args)
            kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
            return owner.call(lambda: value(*args, **kwargs))

        return method

    def __repr__(self) -> str:
        return f"Remote({self._obj!r})"
