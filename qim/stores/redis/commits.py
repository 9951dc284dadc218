"""CommitStore on Redis (qim/stores/commits.py): the reserving Lua scripts
(reserve_and_record, reserve_group_send, group_change, state_change with commit_lib),
record (split mode) and mark_committed; reads pipelined. Keys in keys.py.

Several core instances (docs/decisions/0096): every call about one conversation goes to
the instance of its commit bucket (RedisTopology.core), where its keys and the
revocation cutoffs its reserve reads (decision 0100) live; a call over many buckets
(load, stale, inflight_count) is split per instance, one pipelined round trip each, the
instances concurrently (spread.py). Group commit (decision 0026) coalesces per instance:
each core client has its own Scripts."""

from __future__ import annotations

from typing import Optional, Sequence

from qim._core import ids
from qim.consts import COMMIT_BUCKET_COUNT
from qim.proto.v1 import message_pb2
from qim.stores.commits import (
    CommitRef,
    CommitReply,
    Committed,
    GroupChange,
    GroupSendCheck,
    LoadedCommit,
    RefusalKept,
    Reservation,
    Reserved,
    StaleScan,
    StateChange,
)
from qim.stores.errors import Conflict
from qim.stores.groups import encode_members
from qim.stores.redis.keys import CommitKeys, inflight_key, parse_commit_key, record_key_for, revocation_key
from qim.stores.redis.scripts import Scripts, boundary
from qim.stores.redis.spread import gather_all, spread
from qim.stores.redis.topology import as_topology

SCRIPTS = ("reserve_and_record", "reserve_group_send", "group_change", "state_change", "record", "mark_committed",
           "commit_stale_scan", "policy_refuse")
STATE_NAMES: dict[int, str] = {message_pb2.MESSAGE_STATE_RECALLED: "RECALLED",
                               message_pb2.MESSAGE_STATE_DELETED: "DELETED"}


def commit_key(ref: CommitRef) -> str:
    """The commit hash key of `ref`."""
    return CommitKeys(ref.tenant, ref.conversation_id).commit(ref.sender_id, ref.client_message_id)


def _ref_of(key: str, conversation_id: bytes) -> CommitRef:
    parsed = parse_commit_key(key)
    if parsed is None:
        raise ValueError(f"not a commit key: {key[:12]}...")
    tenant, sender, cmid = parsed
    return CommitRef(tenant, conversation_id, sender, cmid)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisCommitStore:
    """CommitStore over the core instances of a RedisTopology (or one redis-py client;
    see the Protocol for shapes and errors)."""

    def __init__(self, client) -> None:
        self._t = t = as_topology(client)
        # group commit (docs/decisions/0026): the reserves and mark_committeds of concurrent sends
        # of one event-loop iteration share one pipelined round trip per core instance
        self._scripts = {id(c): t.scripts(c, SCRIPTS, coalesce=True) for c in t.core_clients}

    def _buckets(self, skip_moving: bool) -> list[tuple[object, list[int]]]:
        """The commit buckets of each core instance, in bucket order, as the placement map
        says now (a bucket moves: decision 0113). A bucket being moved raises
        StoreUnavailable, or is left out with `skip_moving` (the recovery scan: it finds
        that bucket's commits on the target after the move)."""
        moving = self._t.moving_buckets() if skip_moving else frozenset()
        return self._t.group_by([b for b in range(COMMIT_BUCKET_COUNT) if b not in moving], self._t.core)

    def _on(self, bucket: int) -> Scripts:
        """The (coalescing) Scripts of the core instance holding `bucket`."""
        return self._scripts[id(self._t.core(bucket))]

    async def _reserve(self, script: str, res: Reservation, extra_keys: Sequence[str],
                       extra_args: Sequence) -> Reserved:
        ref = res.ref
        keys = CommitKeys(ref.tenant, ref.conversation_id)
        ck = keys.commit(ref.sender_id, ref.client_message_id)
        prev = keys.commit(ref.sender_id, res.previous) if res.previous else ck
        status, state, mid, cseq, cat, older = await self._on(keys.bucket).call(
            script,
            [ck, keys.seq(), keys.record(res.message_id), keys.history(), keys.inflight(), keys.unpublished(),
             keys.unpublished_owners(), keys.last_id(), prev, *extra_keys],
            [res.digest, res.message_id, res.created_at_ms, res.record_prefix, res.audience,
             "1" if res.split else "0", res.writer_token, "1" if res.list_older else "0",
             "1" if res.previous else "0", res.older_max, *extra_args])
        if status == b"REFUSED":  # a kept refusal of the send policy (qim_refusal_check)
            raise RefusalKept(_text(state))
        listed = [(_ref_of(_text(older[i]), ref.conversation_id), int(older[i + 1])) for i in range(0, len(older), 2)]
        return Reserved(status == b"FRESH", _text(state), mid, int(cseq), int(cat), listed)

    async def reserve(self, res: Reservation, group: Optional[GroupSendCheck] = None) -> Reserved:
        """CommitStore.reserve: reserve_and_record.lua, or reserve_group_send.lua for a group
        send; both check the sender's revocation cutoffs (device and user) against
        `res.token_iat` in the same call (docs/decisions/0080)."""
        ref = res.ref
        keys = CommitKeys(ref.tenant, ref.conversation_id)
        revoked = [revocation_key(ref.tenant, ref.sender_id, res.device_id), revocation_key(ref.tenant, ref.sender_id, 0)]
        # with a send policy the kept refusal is read in the same call (RefusalKept,
        # decision 0099 Amendment); without one the key is not passed and nothing is read
        kept = [keys.refusal(ref.sender_id, ref.client_message_id)] if res.policy_checked else []
        if group is None:
            return await self._reserve("reserve_and_record", res, [*revoked, *kept], [res.token_iat])
        return await self._reserve("reserve_group_send", res, [keys.group_meta(), keys.group_members(), *revoked,
                                                               *kept], [group.version, group.actor, res.token_iat])

    async def reserve_group_change(self, res: Reservation, change: GroupChange) -> Reserved:
        """CommitStore.reserve_group_change: group_change.lua (meta, members, snapshot of the new version)."""
        keys = CommitKeys(res.ref.tenant, res.ref.conversation_id)
        version = 1 if change.op == "create" else (change.expected_version or 0) + (change.op != "title")
        items = [f"+{u}" for u in sorted(change.joins)] + [f"-{u}" for u in sorted(change.leaves)]
        return await self._reserve(
            "group_change", res, [keys.group_meta(), keys.group_members(), keys.group_snapshot(version)],
            [change.op, "" if change.expected_version is None else change.expected_version, change.actor,
             encode_members(change.members_after), len(set(change.members_after)), change.snapshot_ttl_s,
             change.group_id, change.intervals_kept, change.title, *items])

    async def reserve_state_change(self, res: Reservation, change: StateChange) -> Reserved:
        """CommitStore.reserve_state_change: state_change.lua, guarded by the SHA-1 of the record as read
        (expected_version "": the record was read from the archive, docs/decisions/0023)."""
        keys = CommitKeys(res.ref.tenant, res.ref.conversation_id)
        return await self._reserve(
            "state_change", res,
            [keys.record(change.message_id), keys.state(change.message_id), keys.group_meta(),
             keys.group_members(), keys.archived_states(),
             *(k for mid, _ in change.also for k in (keys.record(mid), keys.state(mid)))],
            [change.expected_version, change.new_record, STATE_NAMES.get(change.state, ""),
             "" if change.group_version is None else change.group_version, change.actor or "",
             change.message_id.hex(), *(a for mid, rec in change.also for a in (rec, mid.hex()))])

    async def record(self, ref: CommitRef, message_id: bytes) -> str:
        """CommitStore.record: record.lua (split mode only)."""
        keys = CommitKeys(ref.tenant, ref.conversation_id)
        state = await self._on(keys.bucket).call(
            "record", [keys.commit(ref.sender_id, ref.client_message_id), keys.record(message_id), keys.history()],
            [])
        return _text(state)

    async def mark_committed(self, ref: CommitRef, outbox_offset: int, ttl_ms: int) -> Committed:
        """CommitStore.mark_committed: mark_committed.lua."""
        keys = CommitKeys(ref.tenant, ref.conversation_id)
        _, mid, cseq, cat = await self._on(keys.bucket).call(
            "mark_committed", [keys.commit(ref.sender_id, ref.client_message_id), keys.inflight(),
                               keys.unpublished(), keys.unpublished_owners()],
            [outbox_offset, ttl_ms])
        return Committed(mid, int(cseq), int(cat))

    async def load(self, refs: Sequence[CommitRef]) -> list[Optional[LoadedCommit]]:
        """CommitStore.load: two pipelined round trips per core instance (commit hashes,
        then their records), the instances concurrently."""
        if not refs:
            return []
        rows = await spread(self._t, [(commit_key(r), r) for r in refs],
                            lambda item: self._t.core(_bucket(item[1])), _load_on)
        out: list[Optional[LoadedCommit]] = []
        for (state, mid, aud, cseq, cat, reserved), rec in rows:
            if state is None:
                out.append(None)
                continue
            state = _text(state)
            out.append(LoadedCommit(state, mid, int(cseq), int(cat), aud, reserved if state == "RESERVED" else rec))
        return out

    async def unpublished(self, tenant: int, conversation_id: bytes, upto_seq: int,
                          limit: int) -> list[tuple[CommitRef, int]]:
        """CommitStore.unpublished: one ZRANGEBYSCORE of the unpublished ZSET."""
        keys = CommitKeys(tenant, conversation_id)
        with boundary("unpublished commits"):
            rows = await self._t.core(keys.bucket).zrangebyscore(keys.unpublished(), "-inf", upto_seq, start=0,
                                                                 num=limit, withscores=True)
        return [(_ref_of(_text(ck), conversation_id), int(seq)) for ck, seq in rows]

    async def stale(self, older_than_ms: int, per_bucket: int) -> StaleScan:
        """CommitStore.stale: commit_stale_scan.lua over the 256 in-flight ZSETs (their
        scores are Redis's clock at the reserve: commit_lib.lua), one call per core
        instance over its buckets, then, only where some are stale, two pipelined round
        trips on that instance; the instances concurrently."""
        parts = await gather_all([self._stale_on(client, buckets, older_than_ms, per_bucket)
                                  for client, buckets in self._buckets(skip_moving=True)])
        scan = StaleScan([])
        for live, res in parts:
            _scanned(scan, live, res)
        return scan

    async def _stale_on(self, client, buckets: list[int], older_than_ms: int,
                        per_bucket: int) -> tuple[list, list]:
        """The stale scan of one core instance: (live commits, their records' replies)."""
        found = await self._scripts[id(client)].call("commit_stale_scan", [inflight_key(b) for b in buckets],
                                                      [older_than_ms, per_bucket])
        with boundary("commit recovery scan"):
            # the script returns 1-based positions into this instance's KEYS
            stale = [(buckets[int(found[i]) - 1], _text(found[i + 1])) for i in range(0, len(found), 2)]
            if not stale:
                return [], []
            async with client.pipeline(transaction=False) as pipe:
                for _, ck in stale:
                    pipe.hmget(ck, "mid", "cseq", "rec")
                heads = await pipe.execute()
            gone = [(b, ck) for (b, ck), (mid, _, _) in zip(stale, heads) if mid is None]
            live = [(ck, mid, int(cseq), rec) for (_, ck), (mid, cseq, rec) in zip(stale, heads) if mid is not None]
            async with client.pipeline(transaction=False) as pipe:
                for bucket, ck in gone:  # expired or already gone: nothing to resume
                    pipe.zrem(inflight_key(bucket), ck)
                for ck, mid, _, _ in live:
                    pipe.get(record_key_for(ck, mid))
                res = await pipe.execute()
        return live, res[len(gone):]

    async def reply_of(self, ref: CommitRef) -> Optional[CommitReply]:
        """CommitStore.reply_of: one HMGET of the commit hash."""
        with boundary("commit read"):
            digest, st, cseq = await self._t.core(_bucket(ref)).hmget(commit_key(ref), "dg", "st", "cseq")
        if digest is None:
            return None
        return CommitReply(digest, _text(st), int(cseq or 0))

    async def exists(self, ref: CommitRef) -> bool:
        """CommitStore.exists: one EXISTS of the commit hash."""
        with boundary("commit read"):
            return bool(await self._t.core(_bucket(ref)).exists(commit_key(ref)))

    async def refuse(self, ref: CommitRef, digest: bytes, reason: str, ttl_ms: int) -> Optional[str]:
        """CommitStore.refuse: policy_refuse.lua on the core instance of the commit bucket
        (one round trip; it replaces the EXISTS a refusal asked before)."""
        keys = CommitKeys(ref.tenant, ref.conversation_id)
        reply = await self._on(keys.bucket).call(
            "policy_refuse", [keys.commit(ref.sender_id, ref.client_message_id),
                              keys.refusal(ref.sender_id, ref.client_message_id)], [digest, reason, ttl_ms])
        return None if reply[0] == b"COMMITTED" else _text(reply[1])

    async def refusal(self, ref: CommitRef, digest: bytes) -> Optional[str]:
        """CommitStore.refusal: one HMGET of the kept-refusal hash."""
        keys = CommitKeys(ref.tenant, ref.conversation_id)
        with boundary("policy refusal read"):
            kept, why = await self._t.core(keys.bucket).hmget(keys.refusal(ref.sender_id, ref.client_message_id),
                                                              "dg", "why")
        if kept is None:
            return None
        if kept != digest:
            raise Conflict("client_message_id reused with other content")
        return _text(why)

    async def inflight_count(self) -> int:
        """CommitStore.inflight_count: ZCARD of the 256 in-flight ZSETs, one pipeline per
        core instance (its buckets), the instances concurrently; StoreUnavailable while a
        bucket moves (its count is not known until it is on its target)."""
        return sum(await gather_all([_zcards(client, buckets) for client, buckets in self._buckets(False)]))


def _bucket(ref: CommitRef) -> int:
    """The commit bucket of `ref`'s conversation."""
    return ids.commit_bucket(ref.tenant, ref.conversation_id)


async def _zcards(client, buckets: list[int]) -> int:
    """The in-flight commits of `buckets` on one core instance (one pipeline)."""
    with boundary("in-flight count"):
        async with client.pipeline(transaction=False) as pipe:
            for bucket in buckets:
                pipe.zcard(inflight_key(bucket))
            return sum(await pipe.execute())


async def _load_on(client, items: list[tuple[str, CommitRef]]) -> list[tuple[list, Optional[bytes]]]:
    """CommitStore.load on one core instance: [(commit hash fields, record bytes)] per
    (commit key, ref), in two pipelined round trips."""
    with boundary("commit load"):
        async with client.pipeline(transaction=False) as pipe:
            for ck, _ in items:
                pipe.hmget(ck, "st", "mid", "aud", "cseq", "cat", "rec")
            fields = await pipe.execute()
        async with client.pipeline(transaction=False) as pipe:
            for (ck, _), f in zip(items, fields):
                pipe.get(record_key_for(ck, f[1]) if f[1] else "qim:none")
            records = await pipe.execute()
    return list(zip(fields, records))


def _scanned(scan: StaleScan, live: list, records: list) -> None:
    """Add one instance's stale commits to `scan` (unreadable ones counted, left in place)."""
    for (ck, _, seq, reserved), raw in zip(live, records):
        raw = raw if raw is not None else reserved  # RESERVED (split mode): the record is in the commit
        try:
            rec = message_pb2.MessageRecord.FromString(raw or b"")
            ref = _ref_of(ck, rec.conversation_id)
        except Exception:  # noqa: BLE001 — DecodeError or a foreign key: left in place, counted
            rec, ref = None, None
        if rec is None or ref is None or not rec.conversation_id:
            scan.unreadable += 1
            continue
        scan.commits.append((ref, seq))
