"""The send-policy seam (issue 36 item 3; docs/decisions/0099-send-policy-seam.md).

One hook sees every direct, group and room send before it commits: the writer's
MessageCommitter and the RoomWriter call `PolicySeam.check(facts, committed)` with the
sender, the conversation, the content and the client_message_id. The deployment's
policy (QIM_SEND_POLICY=module:callable, loaded at start by `load_policy`; modelled on
Synapse's `check_event_for_spam` module callback and Centrifuge's PublishHandler) answers
one of:

- ACCEPT: the send goes on to its commit;
- Replace(body): accepted with another body (e.g. masked words): the replaced body is
  committed instead of the sent one, the send keeps its identity (the client's original
  content, so a retry is recognised) and the sender is told in its SEND_ACK / EDIT_OK
  (`replaced`, `body`; decision 0126). `check` returns the replacement;
- Refuse(reason): ERROR POLICY_REFUSED with the reason, for good (the SDKs raise
  PolicyRefused and keep the body in the failed row);
- Hold(retry_after_ms, reason): not committed yet; ERROR UNAVAILABLE with retry_after_ms,
  so the client keeps the send pending and retries it, same client_message_id, after the
  hint; the retry asks the policy again (a hold is not a final verdict).

Bound to (sender, client_message_id): an accepted send is bound by its commit (a retry
that the policy would now refuse still gets its original ACK: `committed()` is asked
only on a refusal), a refusal by the seam's memo for COMMIT_OP_HELPER_TTL_MS (the
longest a client retries a pending send), so a retry gets the same refusal without the
policy being asked again. Where the commit facts outlive the process (the writer's
CommitStore) the caller passes `kept`, a `KeptRefusals` there: the refusal is kept in
the store too (the process memo only spares asking again), so a retry after a restart
or failover gets the same refusal (decision 0099, Amendment). Without a policy (`QIM_SEND_POLICY` unset) `active` is False
and the callers skip the seam: no call, no await, no round trip.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, NoReturn, Optional, Protocol, Union

from prometheus_client import CollectorRegistry

from qim.consts import COMMIT_OP_HELPER_TTL_MS
from qim.errors import ConfigError, ErrorCode, RequestError
from qim.obs.metrics import MetricSet

logger = logging.getLogger(__name__)

__all__ = ["ACCEPT", "Accept", "Hold", "KeptRefusals", "PolicyHeld", "PolicySeam", "Refuse", "Replace", "SendFacts",
           "SendPolicy", "Verdict", "load_policy"]

# A policy answers within this; past it the send is held (not committed, retried by the
# client): a slower policy must not make the gateway fail the writer over (its attempt
# timeout is 3 s, docs/decisions/0079) nor hold the conversation's turn for long.
POLICY_TIMEOUT_S = 1.0
HOLD_MIN_MS, HOLD_MAX_MS = 1, 60_000  # a hold's retry hint is clamped into this range
TIMEOUT_HOLD_MS = 1000  # the retry hint of a policy that did not answer in time
MEMO_MAX = 65_536  # refusals remembered per process (oldest forgotten first)
REASON_MAX = 200  # characters of a refusal's reason the client is told


@dataclass(frozen=True)
class SendFacts:
    """What a policy sees of one send. `kind` "direct", "group" or "room"; the sender
    (`tenant`, `user_id`, `device_id`: from the token, never from the request);
    `conversation_id` (a room's is ids.conversation_id_room, and `room_id` is set);
    the content (`message_type`, `custom_type`, `body`: bytes, at most
    QIM_MAX_MESSAGE_BODY) and the `client_message_id` (16 bytes); a send's
    `reply_to_message_id` (16 bytes, b"" when none), `mention_user_ids` and `mention_all`
    (decision 0120); `edit_of` (the edited message's id, b"" for a send: an edit's
    `body` is the new body, decision 0126)."""

    kind: str
    tenant: int
    user_id: int
    device_id: int
    conversation_id: bytes
    message_type: int
    custom_type: bytes
    body: bytes
    client_message_id: bytes
    room_id: int = 0
    reply_to_message_id: bytes = b""
    mention_user_ids: tuple[int, ...] = ()
    mention_all: bool = False
    edit_of: bytes = b""

    def digest(self) -> bytes:
        """What identifies the content of the send (a cmid reused with another content
        is CONFLICT, as at the commit); reply, mentions and edit target only when present."""
        h = hashlib.blake2b(digest_size=16)
        parts = [self.conversation_id, self.message_type.to_bytes(4, "big"), self.custom_type, self.body]
        if self.reply_to_message_id or self.mention_user_ids or self.mention_all or self.edit_of:
            mentions = b"".join(u.to_bytes(8, "big") for u in self.mention_user_ids)
            parts += [self.reply_to_message_id, mentions, bytes([self.mention_all]), self.edit_of]
        for part in parts:
            h.update(len(part).to_bytes(4, "big") + part)
        return h.digest()


@dataclass(frozen=True)
class Accept:
    """The send goes on to its commit."""


@dataclass(frozen=True)
class Replace:
    """Accepted with `body` instead of the sent body (masked words; decision 0126): the
    writer commits `body` (at most QIM_MAX_MESSAGE_BODY, else the send is refused), the
    sender's SEND_ACK / EDIT_OK says `replaced` and carries it. A body equal to the sent
    one is a plain accept."""

    body: bytes


@dataclass(frozen=True)
class Refuse:
    """Refused for good: the client is told ERROR POLICY_REFUSED with `reason` (safe to
    show to the sender; never the body)."""

    reason: str = "refused by the send policy"


@dataclass(frozen=True)
class Hold:
    """Not committed now: the client is told ERROR UNAVAILABLE with `retry_after_ms`
    (clamped to 1..60000) and retries the same send after it."""

    retry_after_ms: int
    reason: str = "held by the send policy"


ACCEPT = Accept()
Verdict = Union[Accept, Replace, Refuse, Hold]
SendPolicy = Callable[[SendFacts], Union[Verdict, Awaitable[Verdict]]]


class PolicyHeld(RequestError):
    """A held send: ERROR UNAVAILABLE carrying `retry_after_ms` (the RPC server and the
    gateway put it on the ERROR body; qim/net/rpc.py, qim/services/gateway/conn.py)."""

    def __init__(self, message: str, retry_after_ms: int) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, message)
        self.retry_after_ms = min(max(retry_after_ms, HOLD_MIN_MS), HOLD_MAX_MS)


class KeptRefusals(Protocol):
    """Where one send's refusal is kept beyond the process (the writer: the CommitStore,
    beside the send's commit keys; decision 0099, Amendment)."""

    async def refuse(self, reason: str) -> Optional[str]:
        """Keep the refusal unless the send is committed: the reason that stands (an
        earlier kept refusal's, else `reason`), None when a commit exists (the earlier
        acceptance stands). RequestError CONFLICT when kept for other content."""
        ...

    async def refused(self) -> Optional[str]:
        """The kept refusal's reason, None when none. RequestError CONFLICT as above."""
        ...

    async def committed(self) -> bool:
        """Does a commit of this send exist (an earlier acceptance)?"""
        ...


def load_policy(spec: str) -> Optional[SendPolicy]:
    """QIM_SEND_POLICY "package.module:callable" -> the callable; "" -> None (accept
    everything, the seam is skipped). ConfigError naming the variable when the module does
    not import, has no such attribute or it is not callable: the process refuses to start."""
    if not spec:
        return None
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"QIM_SEND_POLICY={spec!r}: expected 'module:callable'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 — any import failure stops the start with its reason
        raise ConfigError(f"QIM_SEND_POLICY={spec!r}: module {module_name} does not load: "
                          f"{type(exc).__name__}: {exc}") from exc
    target = getattr(module, attr, None)
    if target is None or not callable(target):
        raise ConfigError(f"QIM_SEND_POLICY={spec!r}: {module_name} has no callable {attr!r}")
    return target


class PolicyMetrics(MetricSet):
    """qim_send_policy_verdicts_total{kind, verdict}: the seam's answers by conversation
    kind and verdict (accept, replace, refuse, hold, remembered, timeout, error)."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.verdicts = self.counter("qim_send_policy_verdicts", "Send-policy verdicts", ["kind", "verdict"])


class PolicySeam:
    """The hook the send paths call (module doc). `policy` None: `active` False and the
    callers skip `check` (the default costs nothing). `clock` is monotonic seconds."""

    def __init__(self, policy: Optional[SendPolicy], registry: Optional[CollectorRegistry] = None,
                 memo_ttl_s: float = COMMIT_OP_HELPER_TTL_MS / 1000, memo_max: int = MEMO_MAX,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._policy = policy
        self.active = policy is not None
        # a policy with `asks_once` True is not asked again for a send whose verdict is
        # kept (a refusal, or a commit): one read before it, on the writer only (0114)
        self._asks_once = bool(getattr(policy, "asks_once", False))
        self._m = PolicyMetrics(registry)
        bind = getattr(policy, "use_registry", None)  # a policy with metrics of its own (qim/policy/webhook.py)
        if registry is not None and callable(bind):
            bind(registry)
        self._children: dict[tuple[str, str], Any] = {}  # labelled counters, looked up once
        self._ttl, self._max, self._clock = memo_ttl_s, memo_max, clock
        # (tenant, sender, cmid) -> (content digest, reason, expires at): the refusals
        self._refused: OrderedDict[tuple[int, int, bytes], tuple[bytes, str, float]] = OrderedDict()

    async def check(self, facts: SendFacts, committed: Optional[Callable[[], Awaitable[bool]]] = None,
                    kept: Optional[KeptRefusals] = None) -> Optional[bytes]:
        """Returns when the send may commit: None (commit the sent body; also when the
        verdict is kept: a commit exists and the caller's reserve answers it) or the body
        a Replace verdict commits instead. Raises RequestError POLICY_REFUSED (refused
        now or before for this cmid), CONFLICT (this cmid was refused with another
        content), PolicyHeld (held, the policy did not answer within POLICY_TIMEOUT_S, or
        it failed: fail closed, the client retries). `committed()` is awaited only on a
        refusal: True (a commit of this cmid exists) keeps the earlier acceptance. With
        `kept` (the writer) a refusal is kept there instead (one call that also keeps an
        earlier acceptance: `committed` is not asked), and a held send whose refusal is
        kept gets that refusal; an accepted one is checked by the caller's reserve (no
        extra round trip: the reserve reads the kept refusal, RefusalKept -> `refused_before`).
        A policy with `asks_once` is not asked when `kept` holds the send's verdict."""
        key = (facts.tenant, facts.user_id, facts.client_message_id)
        now = self._clock()
        self._expire(now)
        seen = self._refused.get(key)
        if seen is not None:
            if seen[0] != facts.digest():
                raise RequestError(ErrorCode.CONFLICT, "client_message_id reused with other content")
            self._count(facts.kind, "remembered")
            raise RequestError(ErrorCode.POLICY_REFUSED, seen[1])
        if kept is not None and self._asks_once:
            # a costly policy (the moderation webhook, decision 0114) is asked once per
            # send, also across a writer restart: the kept verdict answers a retry
            stands, accepted_before = await asyncio.gather(kept.refused(), kept.committed())
            if stands is not None:
                self.refused_before(facts, stands)
            if accepted_before:  # accepted before: the reserve answers the original ACK
                self._count(facts.kind, "remembered")
                return None
        verdict = await self._ask(facts)
        if isinstance(verdict, Accept):
            self._count(facts.kind, "accept")
            return None
        if isinstance(verdict, Replace):
            # committed instead of the sent body; the commit binds it to the cmid like an
            # acceptance (a retry finds the commit and its stored record; decision 0126)
            self._count(facts.kind, "replace")
            return verdict.body if verdict.body != facts.body else None
        if isinstance(verdict, Hold):
            stands = await kept.refused() if kept is not None else None
            if stands is not None:  # refused before this process (a restart, a failover)
                self.refused_before(facts, stands)
            self._count(facts.kind, "hold")
            raise PolicyHeld(verdict.reason[:REASON_MAX], verdict.retry_after_ms)
        refusal = verdict.reason[:REASON_MAX] or "refused by the send policy"
        reason: Optional[str] = refusal
        if kept is not None:
            reason = await kept.refuse(refusal)  # the first kept reason stands
        elif committed is not None and await committed():
            reason = None
        if reason is None:  # accepted earlier and committed: that verdict stands
            self._count(facts.kind, "accept")
            return None
        self._keep(facts, reason, now)
        self._count(facts.kind, "refuse")
        raise RequestError(ErrorCode.POLICY_REFUSED, reason)

    def refused_before(self, facts: SendFacts, reason: str) -> NoReturn:
        """A refusal kept elsewhere (KeptRefusals) answered this send: remember it here
        too, count it `remembered` and raise its POLICY_REFUSED."""
        self._keep(facts, reason, self._clock())
        self._count(facts.kind, "remembered")
        raise RequestError(ErrorCode.POLICY_REFUSED, reason)

    def _keep(self, facts: SendFacts, reason: str, now: float) -> None:
        self._refused[(facts.tenant, facts.user_id, facts.client_message_id)] = (facts.digest(), reason,
                                                                                  now + self._ttl)
        while len(self._refused) > self._max:
            self._refused.popitem(last=False)

    def _count(self, kind: str, verdict: str) -> None:
        child = self._children.get((kind, verdict))
        if child is None:
            child = self._children[(kind, verdict)] = self._m.verdicts.labels(kind=kind, verdict=verdict)
        child.inc()

    async def _ask(self, facts: SendFacts) -> Verdict:
        assert self._policy is not None
        try:
            answer = self._policy(facts)
            if inspect.isawaitable(answer):
                async with asyncio.timeout(POLICY_TIMEOUT_S):  # no task of its own (wait_for makes one)
                    answer = await answer
        except asyncio.TimeoutError:
            self._count(facts.kind, "timeout")
            return Hold(TIMEOUT_HOLD_MS, "the send policy did not answer in time")
        except Exception as exc:  # noqa: BLE001 — a policy's bug holds the send (fail closed), never drops it
            logger.error("send policy failed: %s", type(exc).__name__)  # no body, no message text (it may quote it)
            self._count(facts.kind, "error")
            return Hold(TIMEOUT_HOLD_MS, "the send policy failed")
        if not isinstance(answer, (Accept, Replace, Refuse, Hold)) or (
                isinstance(answer, Replace) and not isinstance(answer.body, bytes)):
            logger.error("send policy returned %s, not a Verdict", type(answer).__name__)
            self._count(facts.kind, "error")
            return Hold(TIMEOUT_HOLD_MS, "the send policy failed")
        return answer

    def _expire(self, now: float) -> None:
        while self._refused:
            _, (_, _, until) = next(iter(self._refused.items()))
            if until > now:
                break
            self._refused.popitem(last=False)
