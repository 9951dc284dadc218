"""The NotificationService's sending half (docs/decisions/0130, 0135): one Delivery per
(device, notification), sent through its provider by a pool of workers over a bounded
queue, retried with RetryPolicy (full jitter, never sooner than Retry-After, bounded
attempts), its end reported through the Delivery's future:

- "sent": the provider accepted it;
- "unregistered": the provider said the token or subscription is dead; the registration
  was removed with the store's conditional remove (only while it still holds that token:
  a re-register that raced the answer survives, decision 0128);
- "failed": refused for good, retries exhausted, or the device's provider is off here;
- "duplicate": the Delivery's `guard` said no just before a request: its claim is not
  its own any more (another node made the alert, or holds it, after this one was paused
  or waited on a Retry-After past the claim; decision 0144). Nothing is sent.

`submit` waits while the queue is full: the log consumer is held, nothing is dropped.
A retry waits in a timer task of its own (not a worker), then queues again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Mapping, Optional

from qim.errors import EngineError
from qim.notify.providers.base import Notification, PushProvider, RetryPolicy
from qim.services.notify.metrics import NotifyMetrics
from qim.stores.push import PushRegistrationStore

logger = logging.getLogger(__name__)

End = Literal["sent", "unregistered", "failed", "duplicate"]
REMOVE_RETRY_S = 1.0  # between tries of a store write through an outage


@dataclass
class Delivery:
    """One notification to one device of `user` (`token`: the registration's token, for
    the conditional remove); `done` resolves to its End; `guard` (None: none) is asked
    just before each request and False ends it "duplicate" (module doc)."""

    tenant: int
    user: int
    device: int
    token: str
    notification: Notification
    done: "asyncio.Future[End]"
    attempt: int = 0
    tasks: list = field(default_factory=list)
    guard: Optional[Callable[[], Awaitable[bool]]] = None

    @property
    def provider(self) -> str:
        """The registration's provider name."""
        return self.notification.registration.provider


class Sender:
    """`start()` the workers, `submit(delivery)` (waits for room), `close()`."""

    def __init__(self, providers: Mapping[str, PushProvider], push: PushRegistrationStore, metrics: NotifyMetrics,
                 policy: Optional[RetryPolicy] = None, queue_limit: int = 1024, workers: int = 64) -> None:
        self.providers = dict(providers)
        self._push, self._m = push, metrics
        self.policy = policy or RetryPolicy()
        self._queue: asyncio.Queue[Delivery] = asyncio.Queue(queue_limit)
        self._workers = workers
        self._tasks: set[asyncio.Task] = set()

    def start(self) -> None:
        """Start the workers (in the running loop)."""
        for _ in range(self._workers):
            self._spawn(self._work())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def submit(self, delivery: Delivery) -> None:
        """Queue `delivery` (waits while the queue is full: back-pressure, never a drop)."""
        await self._queue.put(delivery)
        self._m.queue.set(self._queue.qsize())

    async def _work(self) -> None:
        while True:
            d = await self._queue.get()
            self._m.queue.set(self._queue.qsize())
            try:
                await self._one(d)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug must not stop the worker nor lose the delivery's end
                logger.exception("push delivery failed unexpectedly")
                if not d.done.done():
                    d.done.set_exception(exc)

    async def _one(self, d: Delivery) -> None:
        provider = self.providers.get(d.provider)
        if provider is None:  # this deployment has no credentials for it (docs/operations.md)
            d.done.set_result("failed")
            return
        if d.guard is not None and not await self._guarded(d):
            d.done.set_result("duplicate")
            return
        d.attempt += 1
        outcome = await provider.send(d.notification)
        if outcome.kind == "sent":
            d.done.set_result("sent")
        elif outcome.kind == "failed":
            logger.warning("%s refused a notification: %s", d.provider, outcome.reason)
            d.done.set_result("failed")
        elif outcome.kind == "permanent":
            await self._remove(d)
            d.done.set_result("unregistered")
        else:
            delay = self.policy.delay(outcome, d.attempt)
            if delay is None:
                logger.warning("%s: retries exhausted (%s)", d.provider, outcome.reason)
                d.done.set_result("failed")
                return
            self._m.retries.labels(d.provider).inc()
            self._spawn(self._later(d, delay))

    async def _later(self, d: Delivery, delay: float) -> None:
        await asyncio.sleep(delay)
        await self.submit(d)

    async def _guarded(self, d: Delivery) -> bool:
        """The guard's answer, asked again through a store outage (a shard move refuses
        the user's instance for seconds): the alert waits, it is neither sent unclaimed
        nor dropped."""
        assert d.guard is not None
        while True:
            try:
                return await d.guard()
            except EngineError as exc:
                logger.warning("alert claim not renewed yet: %s", type(exc).__name__)
                await asyncio.sleep(REMOVE_RETRY_S)

    async def _remove(self, d: Delivery) -> None:
        """The conditional remove (decision 0128), retried through an outage."""
        while True:
            try:
                await self._push.remove(d.tenant, d.user, d.device, d.token)
                return
            except EngineError as exc:
                logger.warning("push registration not removed yet: %s", exc)
                await asyncio.sleep(REMOVE_RETRY_S)

    async def close(self) -> None:
        """Stop the workers and timers, close the providers."""
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for p in self.providers.values():
            await p.close()
