"""`qim-loadgen rate --mix`: messenger features in the open-loop load (issue 37 "Load";
docs/decisions/0120 replies and mentions, 0121 reactions and typing).

`--mix replies=0.1,mentions=0.1,reactions=0.3,typing=0.2` gives the fraction of the
scheduled operations of each kind; the rest are plain sends. Replies and mentions are
messages: they carry `reply_to_message_id` (a message of the same pair already ACKed)
or `mention_user_ids` (the receiver) and go through the send loss ledger like any send.
REACT and TYPING are not messages (ephemeral, decision 0121): they are tracked here,
apart from the ledger, never counted as lost or duplicated. A reaction targets a message
id of its pair already ACKed (a small bounded ring per pair, RING ids), toggling one of
EMOJI (add, then remove on the next pick of the same pair); a reply or reaction that
finds its pair's ring still empty becomes a plain send. TYPING goes out as scheduled:
the gateway passes at most one per conversation every 2 s and answers the rest
`delivered: false` (counted as throttled, not as errors).

The report line is `mix: replies=S/A mentions=S/A reactions=S/A/R typing=S/D/T` (sent,
acked, refused by an ERROR; typing: sent, delivered, throttled); ERROR codes of REACT
and TYPING on stderr. The run fails (exit 1) when a REACT or TYPING was refused by an
ERROR or never answered. The final arrival counts every operation; the 5 s segment
lines count messages only (their arrival reads low under a mix).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Optional

from qim.cli.argchecks import ArgError
from qim.proto.v1 import message_pb2, reaction_pb2
from qim.protocol import Opcode
from qim.wire.errors import decode_error

KINDS = ("replies", "mentions", "reactions", "typing")
RING = 32  # acked message ids kept per pair: reactions and replies pick among the newest
EMOJI = ("👍", "❤️", "😂", "🎉", "😮", "😢")  # well under the 20 distinct per message (decision 0121)
REACTION, TYPING = "reactions", "typing"


def parse_mix(text: Optional[str]) -> dict[str, float]:
    """`kind=fraction,...` of KINDS into a dict (every kind present, 0 when not named);
    ArgError naming --mix for an unknown kind, a repeated one, a fraction outside 0..1
    or fractions adding up to more than 1."""
    mix = dict.fromkeys(KINDS, 0.0)
    if text is None:
        return mix
    seen = set()
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name not in KINDS:
            raise ArgError(f"--mix wants kind=fraction,... with kinds {', '.join(KINDS)}, got {part.strip()!r}")
        if name in seen:
            raise ArgError(f"--mix names {name} twice")
        seen.add(name)
        try:
            f = float(value)
        except ValueError:
            raise ArgError(f"--mix {name} must be a number 0..1, got {value!r}") from None
        if not 0.0 <= f <= 1.0:
            raise ArgError(f"--mix {name} must be a number 0..1, got {value!r}")
        mix[name] = f
    if sum(mix.values()) > 1.0 + 1e-9:
        raise ArgError(f"--mix fractions add up to {sum(mix.values()):g}, more than 1")
    return mix


class Count:
    """Sent, acked (delivered for typing) and refused (throttled for typing) of one kind."""

    def __init__(self) -> None:
        self.sent = self.acked = self.refused = 0

    def to_dict(self) -> dict:
        """The JSON form."""
        return {"sent": self.sent, "acked": self.acked, "refused": self.refused}


class MixLoad:
    """The mix of one run: `fractions` from parse_mix, `seed` for the kind draws (any
    int: runs differ only in which operation gets which kind)."""

    def __init__(self, fractions: dict[str, float], seed: int) -> None:
        self.fractions = fractions
        self._rng = random.Random(seed)
        self.counts = {k: Count() for k in KINDS}
        self.throttled = 0
        self.error_codes: dict[str, int] = {}
        self._rings: dict[int, deque] = {}
        self._reacted: set[tuple[bytes, str]] = set()
        self.pending: dict[tuple[int, int], str] = {}  # (pair, request_id) -> REACT or TYPING
        self._sends: dict[int, str] = {}  # message ordinal -> replies / mentions

    def draw(self) -> str:
        """The kind of the next operation: one of KINDS or "plain"."""
        x, acc = self._rng.random(), 0.0
        for k in KINDS:
            acc += self.fractions[k]
            if x < acc:
                return k
        return "plain"

    def ephemeral(self, kind: str, pair: int, rid: int, stream, conv: bytes, peer: int) -> bool:
        """Send a REACT or TYPING of `kind` on the pair's sender `stream` (request `rid`);
        False (nothing sent) for a message kind, or a reaction before anything was ACKed."""
        if kind == TYPING:
            typing = reaction_pb2.Typing(conversation_id=conv, peer_user_id=peer)
            stream.send(Opcode.TYPING, rid, typing.SerializeToString())
        elif kind == REACTION and self._rings.get(pair):
            mid = self._rng.choice(self._rings[pair])
            emoji = EMOJI[rid % len(EMOJI)]
            remove = (mid, emoji) in self._reacted
            (self._reacted.discard if remove else self._reacted.add)((mid, emoji))
            req = reaction_pb2.React(
                conversation_id=conv, peer_user_id=peer, message_id=mid, emoji=emoji, remove=remove
            )
            stream.send(Opcode.REACT, rid, req.SerializeToString())
        else:
            return False
        self.pending[(pair, rid)] = kind
        self.counts[kind].sent += 1
        return True

    def extras(self, kind: str, pair: int, n: int, msg: message_pb2.SendMessage) -> None:
        """Make send ordinal `n` of `pair` a reply or a mention when `kind` says so (a
        reply needs an ACKed message of the pair: plain until there is one)."""
        if kind == "replies" and self._rings.get(pair):
            msg.reply_to_message_id = self._rng.choice(self._rings[pair])
        elif kind == "mentions":
            msg.mention_user_ids.append(msg.recipient_user_id)
        else:
            return
        self._sends[n] = kind
        self.counts[kind].sent += 1

    def acked(self, pair: int, n: int, message_id: bytes, ok: bool) -> None:
        """Send ordinal `n` of `pair` was answered (`ok`: SEND_ACK with `message_id`)."""
        kind = self._sends.pop(n, None)
        if kind is not None:
            if ok:
                self.counts[kind].acked += 1
            else:
                self.counts[kind].refused += 1
        if ok:
            ring = self._rings.setdefault(pair, deque(maxlen=RING))
            ring.append(bytes(message_id))
            while len(self._reacted) > RING * max(1, len(self._rings)) * len(EMOJI):  # bounded memory
                self._reacted.pop()

    def answer(self, pair: int, rid: int, op: int, body: bytes) -> None:
        """A reply on the sender stream that was not a send's: REACT_OK, TYPING_OK or ERROR."""
        kind = self.pending.pop((pair, rid), None)
        if kind is None:
            return
        c = self.counts[kind]
        if op == Opcode.TYPING_OK and not reaction_pb2.TypingOk.FromString(body).delivered:
            self.throttled += 1
        elif op in (Opcode.REACT_OK, Opcode.TYPING_OK):
            c.acked += 1
        else:
            code = decode_error(body).code.name if op == Opcode.ERROR else hex(op)
            self.error_codes[f"{kind}:{code}"] = self.error_codes.get(f"{kind}:{code}", 0) + 1
            c.refused += 1

    def ops(self) -> int:
        """REACT and TYPING sent (operations of the schedule that were not messages)."""
        return self.counts[REACTION].sent + self.counts[TYPING].sent

    def clean(self) -> bool:
        """Every REACT and TYPING answered and none refused by an ERROR."""
        return not self.pending and not any(self.counts[k].refused for k in (REACTION, TYPING))

    def line(self) -> str:
        """`mix: replies=S/A mentions=S/A reactions=S/A/R typing=S/D/T`."""
        c = self.counts
        return (
            f"mix: replies={c['replies'].sent}/{c['replies'].acked} "
            f"mentions={c['mentions'].sent}/{c['mentions'].acked} "
            f"reactions={c[REACTION].sent}/{c[REACTION].acked}/{c[REACTION].refused} "
            f"typing={c[TYPING].sent}/{c[TYPING].acked}/{self.throttled} unanswered={len(self.pending)}"
        )

    def report(self) -> dict:
        """The JSON form (`--json`'s "mix")."""
        return {
            "fractions": self.fractions,
            **{k: v.to_dict() for k, v in self.counts.items()},
            "typing_throttled": self.throttled,
            "unanswered": len(self.pending),
            "error_codes": self.error_codes,
        }
