"""The before-send moderation webhook (issue 38; docs/decisions/0114-moderation-webhook.md).

A send policy on the seam of decision 0099: QIM_SEND_POLICY=qim.policy.webhook:policy
makes qim-writer and qim-room ask the operator's HTTP endpoint
(QIM_MODERATION_WEBHOOK_URL) about every direct, group and room send before it commits.

- Request: POST JSON (`request_body`), signed: `X-QIM-Timestamp` (unix seconds) and
  `X-QIM-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>." + body>` with
  QIM_MODERATION_WEBHOOK_SECRET, so the receiver checks it came from QIM and is fresh.
  TLS is verified (the system's CAs, or QIM_MODERATION_WEBHOOK_CA_FILE for a private CA).
- Answer: 200 with an empty body or a JSON object = accept; a 200 object with "body"
  (base64) or "text" (UTF-8) = accept with that replaced content (masked words): it is
  committed instead of the sent body (Replace; decision 0126); 403 = refuse with the object's "reason"; anything else (another status, a body that is
  not a JSON object, a broken response), no answer within QIM_MODERATION_SYNC_TIMEOUT_MS
  (a slot of the concurrency cap included), a refused connection or an open circuit
  breaker = "no answer": QIM_WEBHOOK_FAIL_POLICY decides per kind, open = accept,
  closed = Hold(FAIL_CLOSED_RETRY_MS, FAIL_CLOSED_REASON): ERROR UNAVAILABLE with the
  request id and a retry hint, so the SDKs keep the send pending and retry it (same
  client_message_id) until the webhook answers (decision 0133: no answer is "not now",
  never a final refusal; a 403 stays POLICY_REFUSED).
- No body, token or secret in a log line: failures are logged by outcome and exception
  type only.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import ssl
import time
from typing import Any, Callable, Optional

import aiohttp
from prometheus_client import CollectorRegistry

from qim.config.moderation import WebhookConfig, webhook_config
from qim.errors import ConfigError
from qim.obs.metrics import LATENCY_BUCKETS, MetricSet
from qim.policy import ACCEPT, REASON_MAX, Hold, Refuse, Replace, SendFacts, Verdict

logger = logging.getLogger(__name__)

__all__ = ["FAIL_CLOSED_REASON", "FAIL_CLOSED_RETRY_MS", "WebhookPolicy", "request_body", "sign"]

FAIL_CLOSED_REASON = "moderation unavailable"  # the hold of "no answer" under fail closed
# the retry hint of that hold: the SDKs back off (bounded, jittered) from at least this
# much; one retry a second per held send is little for a webhook coming back (decision 0133)
FAIL_CLOSED_RETRY_MS = 1000
DEFAULT_REFUSE_REASON = "refused by moderation"
NO_ANSWER = ("status", "garbage", "timeout", "unreachable", "breaker", "busy")


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The X-QIM-Signature value: "sha256=" + hex HMAC-SHA256(secret, b"<timestamp>." + body).
    The timestamp is covered, so a receiver refusing stale timestamps refuses replays."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def request_body(facts: SendFacts) -> bytes:
    """The JSON the webhook gets: kind, tenant (decimal string), sender {user_id,
    device_id}, conversation_id (hex), room_id (0 unless a room), message_type,
    custom_type (base64), body (base64 of the bytes), text (the body as UTF-8 when it
    decodes, else null), client_message_id (hex), reply_to_message_id (hex, null when
    none), mentions {user_ids (decimal strings), all}, edit_of (the edited message_id
    in hex for an edit, null for a send; decisions 0120, 0126)."""
    try:
        text: Optional[str] = facts.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return json.dumps({
        "kind": facts.kind, "tenant": str(facts.tenant),
        "sender": {"user_id": facts.user_id, "device_id": facts.device_id},
        "conversation_id": facts.conversation_id.hex(), "room_id": facts.room_id,
        "message_type": facts.message_type, "custom_type": base64.b64encode(facts.custom_type).decode(),
        "body": base64.b64encode(facts.body).decode(), "text": text,
        "client_message_id": facts.client_message_id.hex(),
        "reply_to_message_id": facts.reply_to_message_id.hex() or None,
        "mentions": {"user_ids": [str(u) for u in facts.mention_user_ids], "all": facts.mention_all},
        "edit_of": facts.edit_of.hex() or None,
    }, separators=(",", ":")).encode()


class ModerationMetrics(MetricSet):
    """qim_moderation_verdicts_total{kind, outcome} (accept, refuse, masked, status, garbage,
    timeout, unreachable, breaker, busy), qim_moderation_fail_policy_total{kind, mode}
    (what "no answer" became), qim_moderation_webhook_seconds (one request's latency),
    qim_moderation_breaker_open (1 while open), qim_moderation_waited_total (sends that
    waited for a slot of the concurrency cap)."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.verdicts = self.counter("qim_moderation_verdicts", "Moderation webhook outcomes", ["kind", "outcome"])
        self.failed = self.counter("qim_moderation_fail_policy", "No answer decided by the fail policy",
                                   ["kind", "mode"])
        self.latency = self.histogram("qim_moderation_webhook_seconds", "Webhook request latency",
                                      buckets=LATENCY_BUCKETS)
        self.breaker = self.gauge("qim_moderation_breaker_open", "1 while the webhook's circuit breaker is open")
        self.waited = self.counter("qim_moderation_waited", "Sends that waited for a webhook slot")


class Breaker:
    """Consecutive failures -> open for `open_s` (every call is "no answer" without a
    request); then one trial request: its success closes it, its failure opens it again.
    `clock` monotonic seconds."""

    def __init__(self, failures: int, open_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit, self._open_s, self._clock = failures, open_s, clock
        self._failures, self._until, self._trial = 0, 0.0, False
        self.open = False

    def allow(self) -> bool:
        """May a request go out now? (False: counted as the breaker's "no answer".)"""
        if not self.open:
            return True
        if self._clock() < self._until or self._trial:
            return False
        self._trial = True  # half open: this one request decides
        return True

    def record(self, ok: bool) -> None:
        """The outcome of an allowed request."""
        self._trial = False
        if ok:
            self._failures, self.open = 0, False
            return
        self._failures += 1
        if self.open or self._failures >= self._limit:
            if not self.open:
                logger.warning("moderation webhook breaker open after %d failures", self._failures)
            self.open, self._until = True, self._clock() + self._open_s


class WebhookPolicy:
    """The policy callable (module doc): `await policy(facts)` -> ACCEPT, Replace, Refuse
    (a 403) or Hold (no answer under fail closed, decision 0133), never
    raises for the webhook's faults (they go to the fail policy). `use_registry` moves its
    metrics onto the node's registry (the seam calls it); `close()` ends its HTTP session."""

    # the seam reads a send's kept verdict before asking (the writer's CommitStore: a
    # retried send, also after a writer restart, costs no second request; decision 0114)
    asks_once = True

    def __init__(self, config: WebhookConfig, registry: Optional[CollectorRegistry] = None) -> None:
        if not config.url:
            raise ConfigError("QIM_SEND_POLICY=qim.policy.webhook:policy needs QIM_MODERATION_WEBHOOK_URL")
        self.config = config
        self.metrics = ModerationMetrics(registry)
        self.breaker = Breaker(config.breaker_failures, config.breaker_open_ms / 1000)
        self.slots = asyncio.Semaphore(config.concurrency)  # the concurrency cap (QIM_MODERATION_WEBHOOK_CONCURRENCY)
        self._ssl = ssl.create_default_context(cafile=config.ca_file or None)
        self._session: Optional[aiohttp.ClientSession] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def use_registry(self, registry: CollectorRegistry) -> None:
        """Count on this registry from now on (the node's: its /metrics shows them)."""
        self.metrics = ModerationMetrics(registry)

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __call__(self, facts: SendFacts) -> Verdict:
        outcome, verdict = await self._verdict(facts)
        self.metrics.verdicts.labels(kind=facts.kind, outcome=outcome).inc()
        self.metrics.breaker.set(1 if self.breaker.open else 0)
        if verdict is not None:
            return verdict
        mode = self.config.fail.get(facts.kind, "closed")
        self.metrics.failed.labels(kind=facts.kind, mode=mode).inc()
        logger.info("moderation webhook gave no answer (%s): fail %s for %s", outcome, mode, facts.kind)
        # closed holds rather than refuses: no answer is "not now", so the text is kept
        # pending and sent once the webhook answers again (decision 0133)
        return ACCEPT if mode == "open" else Hold(FAIL_CLOSED_RETRY_MS, FAIL_CLOSED_REASON)

    async def _verdict(self, facts: SendFacts) -> tuple[str, Optional[Verdict]]:
        """(outcome, verdict); verdict None = no answer (the fail policy decides)."""
        if not self.breaker.allow():
            return "breaker", None
        body = request_body(facts)
        stage = "busy"
        try:
            async with asyncio.timeout(self.config.timeout_ms / 1000):  # the slot's wait counts too
                if self.slots.locked():
                    self.metrics.waited.inc()
                async with self.slots:
                    stage = "timeout"
                    started = time.perf_counter()
                    outcome, verdict = await self._post(body)
                    self.metrics.latency.observe(time.perf_counter() - started)
        except TimeoutError:
            self.breaker.record(False)
            return stage, None
        self.breaker.record(outcome not in NO_ANSWER)
        return outcome, verdict

    async def _post(self, body: bytes) -> tuple[str, Optional[Verdict]]:
        ts = int(time.time())
        headers = {"Content-Type": "application/json", "X-QIM-Timestamp": str(ts),
                   "X-QIM-Signature": sign(self.config.secret, ts, body)}
        try:
            async with self._client().post(self.config.url, data=body, headers=headers,
                                           allow_redirects=False) as resp:
                status, raw = resp.status, await resp.read()
        except (aiohttp.ClientConnectorError, ConnectionError) as exc:
            logger.debug("moderation webhook unreachable: %s", type(exc).__name__)
            return "unreachable", None
        except aiohttp.ClientError as exc:  # a broken or non-HTTP answer
            logger.debug("moderation webhook answered garbage: %s", type(exc).__name__)
            return "garbage", None
        return self._answer(status, raw)

    @staticmethod
    def _answer(status: int, raw: bytes) -> tuple[str, Optional[Verdict]]:
        if status not in (200, 403):
            return "status", None
        answer: Any = {}
        if raw.strip():
            try:
                answer = json.loads(raw)
            except ValueError:
                return "garbage", None
            if not isinstance(answer, dict):
                return "garbage", None
        if status == 403:
            reason = answer.get("reason")
            text = reason[:REASON_MAX] if isinstance(reason, str) and reason.strip() else DEFAULT_REFUSE_REASON
            return "refuse", Refuse(text)
        if "body" in answer or "text" in answer:  # a replaced content (decision 0126)
            replaced = _replacement(answer)
            return ("masked", Replace(replaced)) if replaced is not None else ("garbage", None)
        return "accept", ACCEPT

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self.config.concurrency)
            self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))
            self._loop = loop
        return self._session


def _replacement(answer: dict) -> Optional[bytes]:
    """A 200 answer's replaced body: "body" base64 (strict) or "text" a string (UTF-8);
    None when it is neither (the answer is garbage: the fail policy decides)."""
    if "body" in answer:
        value = answer["body"]
        if not isinstance(value, str):
            return None
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            return None
    text = answer["text"]
    return text.encode("utf-8") if isinstance(text, str) else None


_installed: Optional[WebhookPolicy] = None


def __getattr__(name: str) -> Any:
    """`policy`: the process's WebhookPolicy, built from the environment when
    QIM_SEND_POLICY names it (load_policy's getattr): a bad variable stops the start."""
    global _installed
    if name != "policy":
        raise AttributeError(name)
    if _installed is None:
        _installed = WebhookPolicy(webhook_config())
    return _installed
