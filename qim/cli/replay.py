"""`qim-loadgen replay` (the `make demo` replay): real dialogues through the real stack,
checked on what every app is told.

Dialogues come from the PyPI package chatterbot-corpus (chatterbot_corpus/data/<lang>/
*.yml, key `conversations`: lists of strings), languages interleaved round-robin so a
`--limit` covers every language. Each dialogue gets fresh users (random 62-bit base per
run), each with its own ClientRuntime and SQLite LocalStore in a temp dir. Turns
alternate senders; each turn is sent after the previous one was acknowledged.

Bodies: the corpus lines (UTF-8 TEXT) plus binary CUSTOM turns (qim/cli/bodies.py):
every size at and around each threshold (inline budget of direct and of the group,
8 KiB event group, 4 KiB session head, 64 KiB chunk, 1 MiB limit) dealt over the first
dialogues of each kind, so `--limit 10` covers them all, and a mix of large bodies
(--blob-rate per turn, default 3 %: mostly 4-64 KiB, some up to 256 KiB, a few near
1 MiB). A body of 1 MiB + 1 must be refused locally by the SDK (PAYLOAD_TOO_LARGE).

Mode by dialogue index i (i % 3), docs/design.md §12:
  0 online  both users connected;
  1 offline only the current sender is connected while it sends, so every message
            reaches its recipient through the login pull (offline stash path);
  2 cut     both connected; the sender's connection is cut right after the
            SEND_MESSAGE frame is written and before its ACK; the runtime reconnects,
            syncs its mailbox and resends with the same client_message_id if needed.
Every 5th dialogue (--group-every) is replayed in a small group instead
(qim/cli/replay_group.py): the two speakers and an offline listener. A second device is
given to the second user of every 4th direct dialogue (i % 4 == 1) and to the listener
of every other group dialogue. In every 8th direct dialogue (i % 8 == 2) and every third
group dialogue the first speaker recalls its first message after the last turn.

Afterwards every device catches up and the run checks what each app was told
(qim/cli/verify.py, MessagesAdded events only, never the SDK's store): each body
byte-exact (SHA-256), right sender, conversation_seq and type, each message once, each
conversation in conversation_seq order; then unread on every member's session list
(the one definition of docs/design.md §6 over what was sent: own messages never unread),
and unread 0 after MARK_READ on a second device of the same user; a recalled message
must end up shown recalled (no body) and is not unread.

Output: `replay: over_limit_refused=R (as intended: ...) unsent=K (reasons)` (R bodies
above the size limit the SDK refused on purpose; K messages never sent for any other
reason: setup errors, refusals), then the final line `replay: conversations=N messages=M delivered=D lost=L
duplicated=X out_of_order=O corrupt=C unread_wrong=U` (unread_wrong counts session-list
entries whose unread differed). Exit 0 only when D == M, L == X == O == C == U == 0,
the only messages not sent are the intended over-limit refusals and every mode was
exercised as planned (a cut that did not cut is reported on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import logging
import os
import random
import secrets
import sys
import tempfile
import time
from typing import Optional, Sequence

from qim.cli.argchecks import ArgError, in_range, non_negative, positive
from qim.cli.bodies import OVER_LIMIT, Blob, deal, plan_blobs, threshold_sizes
from qim.cli.gateways import parse_gateways
from qim.cli.loadgen_args import load_gateway_args, loadgen_parser
from qim.cli.loadgen_login import LoginFailed, login
from qim.cli.replay_common import TENANT, Tally
from qim.cli.replay_dialogue import DialogueBase, Item, items_of
from qim.cli.replay_group import GROUP_EVERY, GroupDialogue
from qim.cli.replay_history import history_check
from qim.cli.replay_progress import ReplayProgress, print_summary
from qim.cli.tlsopts import client_context
from qim.errors import ConfigError
from qim.sdk import SendAck, direct_conversation

logger = logging.getLogger(__name__)
MODES = ("online", "offline", "cut")
THRESHOLDS_PER_DIALOGUE = 3


def corpus_root() -> str:
    """The chatterbot-corpus data directory (one subdirectory of *.yml per language)."""
    import chatterbot_corpus

    return os.path.join(os.path.dirname(chatterbot_corpus.__file__), "data")


def parse_langs(value: str) -> list[str]:
    """The languages of `--langs` ("english,chinese"); ArgError when it names none or one
    the corpus does not have (the message lists those it has)."""
    langs = [x.strip() for x in value.split(",") if x.strip()]
    root = corpus_root()
    known = sorted(d for d in os.listdir(root) if glob.glob(os.path.join(root, d, "*.yml")))
    unknown = [x for x in langs if x not in known]
    if not langs or unknown:
        what = f"has no corpus language {', '.join(map(repr, unknown))}" if unknown else "names no language"
        raise ArgError(f"--langs {what} (the corpus has: {', '.join(known)})")
    return langs


def load_dialogues(langs: Sequence[str]) -> list[tuple[str, list[str]]]:
    """[(lang, [turn, ...])] interleaved across `langs`; FileNotFoundError for an unknown one."""
    import yaml

    root = corpus_root()
    per_lang: list[list[tuple[str, list[str]]]] = []
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
    out: list[tuple[str, list[str]]] = []
    for i in range(max((len(d) for d in per_lang), default=0)):
        out.extend(d[i] for d in per_lang if i < len(d))
    return out


class Dialogue(DialogueBase):
    """One direct dialogue between two fresh users (mode by index, module docstring)."""

    def __init__(self, index: int, items: list[Item], users: tuple[int, int], cfg: argparse.Namespace,
                 base_dir: str) -> None:
        super().__init__(index, items, cfg, base_dir, users[1] if index % 4 == 1 else None,
                         cfg.recall and index % 8 == 2)
        self.mode = MODES[index % 3]
        self.members = users
        self.conv = direct_conversation(TENANT, *users)

    def peer_of(self, user: int) -> int:
        """The other member of this two-person dialogue."""
        a, b = self.members
        return b if user == a else a

    def sender_of(self, i: int) -> int:
        """Who sends line `i` (the members alternate)."""
        return self.members[i % 2]

    async def setup(self) -> None:
        """Connect both devices (an offline dialogue connects only to send and to pull)."""
        if self.mode != "offline":
            await asyncio.gather(*(d.rt.connect() for d in self.devices.values()))

    async def send_item(self, sender: int, item: Item, over_limit: bool) -> SendAck:
        """Send one corpus line from `sender`; the SendAck (over-limit lines expect a refusal)."""
        rt = self.devices[sender].rt
        if self.mode == "offline":
            await rt.connect()
        cut = self.mode == "cut" and not over_limit  # a refused body never reaches the wire
        reconnects = rt.stats["reconnects"]
        if cut:
            self.devices[sender].faults.cut_after_next_send()
        try:
            ack = await rt.send_message(self.conv, self.peer_of(sender), item.body, item.message_type,
                                        item.custom_type)
        finally:
            if self.mode == "offline":
                await rt.close()
        if cut and rt.stats["reconnects"] == reconnects:  # the message is judged all the same
            self.harness.append("cut mode: a send resolved without a reconnect")
        return ack


def plan_blob_turns(dialogues: list[list[str]], cfg: argparse.Namespace) -> list[list[Blob]]:
    """Binary turns of every dialogue: the dealt threshold sizes (first dialogues of each
    kind, the over-limit body among them) and the large-body mix (deterministic per index)."""
    is_group = [is_group_dialogue(i, cfg) for i in range(len(dialogues))]
    dealt: dict[int, list[int]] = {}
    for group, audience in ((False, 2), (True, 3)):
        sizes = threshold_sizes(audience) if cfg.thresholds else []
        if sizes:
            sizes.insert(THRESHOLDS_PER_DIALOGUE, OVER_LIMIT)
        slots = [i for i, g in enumerate(is_group) if g == group]
        dealt.update(zip(slots, deal(sizes, len(slots), THRESHOLDS_PER_DIALOGUE)))
    return [plan_blobs(len(turns), dealt.get(i, []), cfg.blob_rate, random.Random(f"qim-replay-{i}"))
            for i, turns in enumerate(dialogues)]


def is_group_dialogue(i: int, cfg: argparse.Namespace) -> bool:
    """True for every `--group-every`-th dialogue (replayed as a small group)."""
    return bool(cfg.group_every) and i % cfg.group_every == cfg.group_every - 1


async def replay(cfg: argparse.Namespace) -> Tally:
    """Run the replay described by `cfg` (see `parser()`); returns the totals. ConfigError
    for a --ca-file that cannot be read or --plaintext toward a non-loopback gateway;
    ArgError for --langs the corpus lacks; LoginFailed when a gateway cannot be logged in to.
    Progress goes to stderr unless `cfg.progress` is false (qim/cli/replay_progress.py)."""
    cfg.gateways = parse_gateways(cfg.gateway)  # devices spread over them (qim/cli/gateways.py)
    cfg.tls = client_context(cfg, cfg.gateways[0], "--gateway")  # one TLS context for every device's runtime
    dialogues = load_dialogues(parse_langs(cfg.langs))
    await reach_gateways(cfg, secrets.randbits(62) + 1)
    if cfg.limit:
        dialogues = dialogues[: cfg.limit]
    base = secrets.randbits(62) + 1  # fresh users and groups every run; + 3N stays below 2^63
    blobs = plan_blob_turns([turns for _lang, turns in dialogues], cfg)
    total = Tally()
    sem = asyncio.Semaphore(max(1, cfg.concurrency))
    done: list = []  # the dialogues, for --history-check
    with tempfile.TemporaryDirectory(prefix="qim-replay-") as base_dir, \
            ReplayProgress(len(dialogues), getattr(cfg, "progress", False)) as progress:
        async def one(i: int, turns: list[str]) -> None:
            async with sem:  # bodies are made here, so a run holds only the running dialogues' bytes
                items = items_of(turns, blobs[i], (base + i).to_bytes(8, "big"))
                if is_group_dialogue(i, cfg):
                    listener = base + 2 * len(dialogues) + i
                    g = GroupDialogue(i, items, (base + 2 * i, base + 2 * i + 1, listener), base + i, cfg, base_dir)
                    tally = await g.run()
                    done.append(g)
                else:
                    d = Dialogue(i, items, (base + 2 * i, base + 2 * i + 1), cfg, base_dir)
                    tally = await d.run()
                    done.append(d)
                total.add(tally)
                progress.dialogue_done(tally)

        await asyncio.gather(*(one(i, turns) for i, (_lang, turns) in enumerate(dialogues)))
        if cfg.history_check:  # the archive tier: every history read again, across the archive's hot floor
            progress.history_started(len(done))
            total.history = await history_check(cfg, done, base_dir, int(time.time() * 1000),
                                                on_done=progress.history_done)
    return total


async def reach_gateways(cfg: argparse.Namespace, probe_user: int) -> None:
    """One raw login of a fresh user at every gateway before any dialogue starts, so a
    dead gateway or a refused key stops the run with one line (LoginFailed) instead of
    every dialogue failing its setup and its checks one by one."""
    for i, addr in enumerate(cfg.gateways):
        stream = await login(addr, cfg.token_key, probe_user + i, cfg.tls)
        stream.abort()


def check(cfg: argparse.Namespace) -> None:
    """Every numeric option and --langs, before anything connects; ArgError naming the first bad one."""
    in_range("--limit", cfg.limit, 0)
    in_range("--concurrency", cfg.concurrency, 1)
    in_range("--group-every", cfg.group_every, 0)
    non_negative("--blob-rate", cfg.blob_rate)
    if cfg.blob_rate > 1:
        raise ArgError(f"--blob-rate is a chance per turn, 0..1, got {cfg.blob_rate:g}")
    positive("--sync-timeout", cfg.sync_timeout)
    positive("--send-timeout", cfg.send_timeout)
    non_negative("--history-settle", cfg.history_settle)
    parse_langs(cfg.langs)


def parser() -> argparse.ArgumentParser:
    """The command line of `qim-loadgen replay`."""
    p = loadgen_parser("replay", __doc__, "devices")
    p.add_argument("--langs", default="english,chinese", help="comma-separated corpus languages")
    p.add_argument("--limit", type=int, default=0, help="number of dialogues (0 = all)")
    p.add_argument("--concurrency", type=int, default=8, help="dialogues run at once")
    p.add_argument("--group-every", type=int, default=GROUP_EVERY,
                   help="replay every Nth dialogue as a small group (0: none)")
    p.add_argument("--blob-rate", type=float, default=0.03,
                   help="per text turn, chance of an extra binary turn from the large-body mix (0: none)")
    p.add_argument("--no-thresholds", dest="thresholds", action="store_false",
                   help="leave out the binary turns at the threshold sizes")
    p.add_argument("--no-unread", dest="unread", action="store_false",
                   help="skip the unread and MARK_READ checks (backends without a session list)")
    p.add_argument("--no-recall", dest="recall", action="store_false",
                   help="send no recalls (backends without RECALL_MESSAGE)")
    p.add_argument("--sync-timeout", type=float, default=20.0, help="seconds to wait for delivery")
    p.add_argument("--send-timeout", type=float, default=30.0, help="seconds to wait for one ACK")
    p.add_argument("--history-check", action="store_true",
                   help="afterwards read every conversation's history again through the SDK and compare it with "
                        "what was sent (qim/cli/replay_history.py; printed before the last line)")
    p.add_argument("--history-settle", type=float, default=0.0,
                   help="--history-check: seconds to wait for the trimmer to give every conversation a hot floor")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bars or summary table on stderr (the verdict lines are printed either way)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Replay the corpus; 0 when the client view is clean (nothing lost, duplicated, reordered,
    corrupt), 1 otherwise (also when no gateway takes a login: one line), 2 on bad arguments."""
    cfg = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if cfg.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        check(cfg)  # ArgError is a ValueError
        load_gateway_args(cfg)  # a bad --ca-file or --plaintext: exit 2 first (qim/cli/loadgen_args.py)
    except (ValueError, ConfigError) as exc:
        print(f"qim-loadgen replay: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        total = asyncio.run(replay(cfg))
    except LoginFailed as exc:  # no login at all: nothing to replay, one line
        print(f"qim-loadgen replay: {exc}", file=sys.stderr)
        return 1
    print_summary(total, time.monotonic() - started, cfg.progress)
    if total.harness:
        print(f"replay: not exercised as planned: {total.harness}", file=sys.stderr)
    print(total.not_sent_line(), flush=True)
    if total.history is not None:
        print(total.history.line(), flush=True)
    print(total.line(), flush=True)
    return 0 if total.ok else 1


if __name__ == "__main__":
    sys.exit(main())
