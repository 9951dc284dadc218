"""`qim-loadgen replay` (the `make demo` replay): real dialogues through the real stack.

Dialogues come from the PyPI package chatterbot-corpus (chatterbot_corpus/data/<lang>/
*.yml, key `conversations`: lists of strings), languages interleaved round-robin so a
`--limit` covers every language. Each dialogue gets two fresh users (random 62-bit
base per run), each with its own ClientRuntime and SQLite LocalStore in a temp dir.
Turns alternate senders; each turn is sent after the previous one was acknowledged.

Mode by dialogue index i (i % 3), DESIGN.md §12:
  0 online  both users connected;
  1 offline only the current sender is connected while it sends, so every message
            reaches its recipient through the login pull (offline stash path);
  2 cut     both connected; the sender's connection is cut right after the
            SEND_MESSAGE frame is written and before its ACK; the runtime reconnects,
            syncs its mailbox and resends with the same client_message_id if needed.

Every 5th dialogue (--group-every) is replayed in a small group instead (qim/cli/replay_group.py): the
two speakers and an offline listener.

Afterwards each recipient syncs its mailbox and the run checks: delivered =
byte-identical body, right sender, right conversation_seq, at the right recipient;
each message once (per message_id); turn order = conversation_seq order. Output: one
final line `replay: conversations=N messages=M delivered=D lost=L duplicated=X
out_of_order=O`; exit 0 only when D == M and L == X == O == 0.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import logging
import os
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional, Sequence

from qim.cli.replay_common import Tally, close_runtimes
from qim.cli.replay_group import GROUP_EVERY, GroupDialogue
from qim.sdk import ClientRuntime, LocalStore, SendAck, direct_conversation
from qim.services.gateway.auth import issue_dev_token

logger = logging.getLogger(__name__)
MODES = ("online", "offline", "cut")
TENANT = 0


def load_dialogues(langs: Sequence[str]) -> list[tuple[str, list[str]]]:
    """[(lang, [turn, ...])] interleaved across `langs`; FileNotFoundError for an unknown one."""
    import chatterbot_corpus
    import yaml

    root = os.path.join(os.path.dirname(chatterbot_corpus.__file__), "data")
    per_lang = []
    for lang in langs:
        files = sorted(glob.glob(os.path.join(root, lang, "*.yml")))
        if not files:
            raise FileNotFoundError(f"no chatterbot-corpus data for language {lang!r}")
        dialogues = []
        for path in files:
            with open(path, encoding="utf-8") as fh:
                doc = yaml.safe_load(fh) or {}
            for conv in doc.get("conversations") or []:
                turns = [str(t) for t in conv if t is not None]
                if turns:
                    dialogues.append((lang, turns))
        per_lang.append(dialogues)
    out = []
    for i in range(max((len(d) for d in per_lang), default=0)):
        out.extend(d[i] for d in per_lang if i < len(d))
    return out


@dataclass
class Sent:
    turn: int
    sender: int
    recipient: int
    body: bytes
    ack: SendAck


class Dialogue:
    """One dialogue between two fresh users; `run()` returns its Tally."""

    def __init__(self, index: int, turns: list[str], users: tuple[int, int], cfg: argparse.Namespace,
                 base_dir: str) -> None:
        self.index, self.turns, self.users, self.cfg = index, turns, users, cfg
        self.mode = MODES[index % 3]
        self.conv = direct_conversation(TENANT, *users)
        self.rts: dict[int, ClientRuntime] = {}
        for user in users:
            store = LocalStore.open(LocalStore.path_for(base_dir, cfg.gateway, TENANT, user), TENANT, user)
            token = issue_dev_token(cfg.token_secret.encode(), TENANT, user, store.device_id)
            self.rts[user] = ClientRuntime(cfg.gateway, token, store, event_queue=False,
                                           send_timeout=cfg.send_timeout)
        self.sent: list[Sent] = []

    async def run(self) -> Tally:
        t = Tally(conversations=1, messages=len(self.turns), by_mode={self.mode: 1})
        try:
            await self._send_all()
            await self._sync_recipients()
            self._verify(t)
        except Exception as exc:  # one broken dialogue must not hide the others' results
            print(f"dialogue {self.index} ({self.mode}) failed: {exc.__class__.__name__}: {exc}", file=sys.stderr)
            t.lost = t.messages - t.delivered
        finally:
            await close_runtimes(self.rts.values(), t)
        return t

    async def _send_all(self) -> None:
        a, b = self.users
        if self.mode != "offline":
            await asyncio.gather(*(rt.connect() for rt in self.rts.values()))
        for i, text in enumerate(self.turns):
            sender, recipient = (a, b) if i % 2 == 0 else (b, a)
            rt, body = self.rts[sender], text.encode("utf-8")
            if self.mode == "offline":
                await rt.connect()
            reconnects = rt.stats["reconnects"]
            if self.mode == "cut":
                rt.cut_after_next_send()
            ack = await rt.send_message(self.conv, recipient, body)
            if self.mode == "cut" and rt.stats["reconnects"] == reconnects:
                raise RuntimeError("cut mode: the send resolved without a reconnect")
            if self.mode == "offline":
                await rt.close()
            self.sent.append(Sent(i, sender, recipient, body, ack))

    async def _sync_recipients(self) -> None:
        deadline = time.monotonic() + self.cfg.sync_timeout
        for user in self.users:
            rt = self.rts[user]
            await rt.connect()
            want = [s.ack.message_id for s in self.sent if s.recipient == user]
            while True:
                await rt.pull_mailbox()
                missing = [m for m in want if not await rt.store.run(rt.store.has_message, m)]
                if not missing or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)  # the mailbox watermark may still be catching up

    def _verify(self, t: Tally) -> None:
        seqs = [s.ack.conversation_seq for s in self.sent]
        t.out_of_order += sum(1 for x, y in zip(seqs, seqs[1:]) if y <= x)
        for user in self.users:
            expected = [s for s in self.sent if s.recipient == user]
            rows = [r for r in self.rts[user].store.messages(self.conv) if r.sender_id != user]
            by_id = {r.message_id: r for r in rows}
            ok_turns = []
            for s in expected:
                r = by_id.get(s.ack.message_id)
                if (r is not None and r.body == s.body and r.sender_id == s.sender
                        and r.conversation_seq == s.ack.conversation_seq):
                    t.delivered += 1
                    ok_turns.append((r.conversation_seq, s.turn))
            wanted = {s.ack.message_id for s in expected}
            t.duplicated += sum(1 for r in rows if r.message_id not in wanted)
            order = [turn for _seq, turn in sorted(ok_turns)]
            t.out_of_order += sum(1 for x, y in zip(order, order[1:]) if y < x)
        t.lost += t.messages - t.delivered


async def replay(cfg: argparse.Namespace) -> Tally:
    """Run the replay described by `cfg` (see `parser()`); returns the totals."""
    dialogues = load_dialogues([x.strip() for x in cfg.langs.split(",") if x.strip()])
    if cfg.limit:
        dialogues = dialogues[: cfg.limit]
    base = secrets.randbits(62) + 1  # fresh users and groups every run; + 3N stays below 2^63
    total = Tally()
    sem = asyncio.Semaphore(max(1, cfg.concurrency))
    with tempfile.TemporaryDirectory(prefix="qim-replay-") as base_dir:
        async def one(i: int, turns: list[str]) -> None:
            async with sem:
                if cfg.group_every and i % cfg.group_every == cfg.group_every - 1:
                    listener = base + 2 * len(dialogues) + i
                    g = GroupDialogue(i, turns, (base + 2 * i, base + 2 * i + 1, listener), base + i, cfg,
                                      base_dir, TENANT)
                    total.add(await g.run())
                else:
                    d = Dialogue(i, turns, (base + 2 * i, base + 2 * i + 1), cfg, base_dir)
                    total.add(await d.run())

        await asyncio.gather(*(one(i, turns) for i, (_lang, turns) in enumerate(dialogues)))
    return total


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qim-loadgen replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--gateway", default=os.environ.get("QIM_GATEWAY_ADDR"),
                   help="gateway host:port (default: $QIM_GATEWAY_ADDR)")
    p.add_argument("--token-secret", default=os.environ.get("QIM_DEV_TOKEN_SECRET"),
                   help="development token secret (default: $QIM_DEV_TOKEN_SECRET)")
    p.add_argument("--langs", default="english,chinese", help="comma-separated corpus languages")
    p.add_argument("--limit", type=int, default=0, help="number of dialogues (0 = all)")
    p.add_argument("--concurrency", type=int, default=8, help="dialogues run at once")
    p.add_argument("--group-every", type=int, default=GROUP_EVERY,
                   help="replay every Nth dialogue as a small group (0: none)")
    p.add_argument("--sync-timeout", type=float, default=20.0, help="seconds to wait for delivery")
    p.add_argument("--send-timeout", type=float, default=30.0, help="seconds to wait for one ACK")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    cfg = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if cfg.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not cfg.gateway or not cfg.token_secret:
        print("qim-loadgen replay: --gateway/QIM_GATEWAY_ADDR and --token-secret/QIM_DEV_TOKEN_SECRET are required",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    total = asyncio.run(replay(cfg))
    print(f"modes: {total.by_mode} sdk: {total.sdk} elapsed: {time.monotonic() - started:.1f}s", file=sys.stderr)
    print(total.line(), flush=True)
    return 0 if total.ok else 1


if __name__ == "__main__":
    sys.exit(main())
