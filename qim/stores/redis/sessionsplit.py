"""How one durable session projection batch is split over several Redis instances
(docs/decisions/0097; the one-instance call: session_project.lua).

Session shard s is MailboxShard s: its checkpoint lives on the shard's mailbox instance
with its users (topology.py). A dispatch record of shard s lists only shard s's users
(the fanout splits recipients by MailboxShard), so the registrations it produces are of
users on s's instance, with one exception (qim/services/session/register.py): a direct
message registers its sender too, from the recipient's record, and the sender's shard
may live on another instance. The split keeps what one call guaranteed for each shard,
"the checkpoint moves only after every registration of its records ran":

- each instance holding a checkpoint of the batch gets ONE session_project call with
  its shards' checkpoints and the registrations of its users that only its shards
  produced (atomic per instance, so per shard, as before);
- a registration that a shard on ANOTHER instance may have produced (a registration
  carrying the user's own seq and a peer, the peer's shard moving on another
  instance) is written first, through `register` (idempotent, order-independent),
  before any checkpoint call: its producer's checkpoint cannot move before it ran,
  whichever instance call fails or whenever the process dies.

One instance unavailable holds back only the shards that need it (`project_split`,
decision 0097's Amendment): the shards on it, and a shard whose sender registration
could not be written there; every other instance's call runs, and the shards not
written are named by ShardsUnavailable for the caller to retry alone.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Optional, Sequence

from qim.stores.errors import ShardsUnavailable, StoreUnavailable
from qim.stores.redis.keys import session_shard_checkpoint_key, ucs_pending_key
from qim.stores.sessions import Registration


def project_args(binding: str, shards: Sequence[int], moves: dict[int, tuple[int, int, int]],
                 tenures: Optional[dict[int, str]], first_registrations: bool) -> tuple[list, list]:
    """The KEYS and ARGV head of one session_project.lua call for `shards` (each moved by
    `moves[shard]` = (owner_epoch, expected next offset, new next offset)); the caller
    appends the registrations' keys and args."""
    keys: list = [ucs_pending_key()] + [session_shard_checkpoint_key(s) for s in shards]
    args: list = [binding, len(shards), "1" if first_registrations else "0"]
    for shard in shards:
        epoch, expected, new = moves[shard]
        args += [shard, epoch, (tenures or {}).get(shard, ""), str(expected), str(new)]
    return keys, args


def split_project(topology: Any, moves: dict[int, tuple[int, int, int]],
                  regs: Sequence[Registration]) -> tuple[list[Registration], list[tuple[Any, list[int], list]]]:
    """(registrations to write first, [(client, its shards of `moves` in order, its
    registrations)]): one entry per instance holding a checkpoint of `moves` or the
    user of a registration (module doc). Raises nothing; every registration lands in
    exactly one place."""
    layout = topology.layout
    calls: dict[int, tuple[Any, list[int], list]] = {}
    for shard in sorted(moves):
        c = topology.shard(shard)
        calls.setdefault(id(c), (c, [], []))[1].append(shard)
    first: list[Registration] = []
    for r in regs:
        c = topology.user(r.tenant, r.user)
        if r.own_seq and r.peer:  # maybe a sender's registration, produced by the peer's shard
            producer = layout.user_shard(r.tenant, r.peer)
            if producer in moves and topology.shard(producer) is not c:
                first.append(r)
                continue
        calls.setdefault(id(c), (c, [], []))[2].append(r)
    return first, list(calls.values())


async def project_split(topology: Any, moves: dict[int, tuple[int, int, int]], regs: Sequence[Registration],
                        register_on: Callable[[Any, list[Registration]], Awaitable[int]],
                        project_on: Callable[[Any, list[int], list[Registration]], Awaitable[int]]) -> int:
    """One durable batch over several instances (module doc): the registrations to write
    first (`register_on(client, regs)`, per instance, concurrently), then one
    `project_on(client, shards, regs)` per instance, concurrently. How many
    conversations were new.

    An instance that is unavailable (StoreUnavailable) holds back only what needs it:
    a first registration not written there keeps its producer's checkpoint (and that
    instance's own call) from running; a call failing there leaves its shards
    unwritten. Every other call runs. Raises ShardsUnavailable naming the shards not
    written when there are any; any other error of a call (NotOwner,
    CheckpointConflict, StoreCorrupt) is raised first, after every call ended."""
    layout = topology.layout
    first, calls = split_project(topology, moves, regs)
    unwritten: set[int] = set()
    down: set[int] = set()  # instances (id of client) a first registration could not be written to
    causes: list[StoreUnavailable] = []
    added = 0
    if first:
        groups = topology.group_by(first, lambda r: topology.user(r.tenant, r.user))
        got = await asyncio.gather(*[register_on(c, part) for c, part in groups], return_exceptions=True)
        for (c, part), r in zip(groups, got):
            if isinstance(r, StoreUnavailable):
                down.add(id(c))
                causes.append(r)
                # its producers' checkpoints must not pass the records that produced it
                unwritten.update(layout.user_shard(x.tenant, x.peer) for x in part)
        _raise_other(got)
        added += sum(r for r in got if not isinstance(r, BaseException))
    runs: list[tuple[Any, list[int], list[Registration]]] = []
    for c, shards, part in calls:
        if id(c) in down:  # its shards' records may have produced a registration not written
            unwritten.update(shards)
            continue
        runs.append((c, [s for s in shards if s not in unwritten], part))
    got = await asyncio.gather(*[project_on(c, shards, part) for c, shards, part in runs], return_exceptions=True)
    for (_, shards, _), r in zip(runs, got):
        if isinstance(r, StoreUnavailable):
            causes.append(r)
            unwritten.update(shards)
    _raise_other(got)
    if unwritten:
        raise ShardsUnavailable(f"session shards {sorted(unwritten)} not written: {causes[0].message}", unwritten)
    return added + sum(r for r in got if not isinstance(r, BaseException))


def _raise_other(results: Sequence[Any]) -> None:
    """Raise the first error of `results` that is not StoreUnavailable (in order)."""
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, StoreUnavailable):
            raise r
