"""Keyspace, tables and migrations of the archive tier (docs/design.md §8;
docs/decisions/0023-archive-tier.md has the reasons).

`apply` (qimctl schema apply) creates the keyspace when absent and runs every migration
above the recorded version, in order, recording each in `schema_version`; running it
again changes nothing. `check` (every process that uses the tier, at start) refuses a
keyspace without the current version or with a single-node replication the deployment
did not allow, naming `qimctl schema apply` or the variable.

Replication: NetworkTopologyStrategy with 3 replicas in QIM_SCYLLA_LOCAL_DC;
SimpleStrategy with fewer (one per node of a cluster of one or two nodes) only when
QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV=1 (docs/design.md §8). The switch never excuses fewer
replicas than the cluster has nodes, up to 3: on a three-node cluster a keyspace below
RF 3 is refused with or without it (docs/decisions/0089).
Every table keeps default_time_to_live 0: a message row's TTL is set per write from
its conversation's retention class; message tables see no DELETE (a recall or delete
rewrites the row's state and body with a later write timestamp).

Tables (u128 = 16-byte blob, u64 = bigint with bit 63 clear):
- message_record ((tenant, message_id)): the canonical record by id (mailbox page
  fills, recall/delete lookups);
- conversation_history ((tenant, conversation_id, bucket), conversation_seq DESC): the
  history index, carrying the whole record so a page is one query per partition;
  bucket = conversation_seq >> 14 keeps a partition at 16384 messages at most;
- conversation_archive ((tenant, conversation_id)): max_seq archived, written with
  write timestamp = max_seq so the highest wins in any order (paging from the latest);
- user_conversation_state ((tenant, user_id), conversation_id): first registrations of
  SessionProjection (kind, peer, first_seen_at_ms);
- schema_version (component, version).
"""

from __future__ import annotations

import re
import time

from qim.consts import SCYLLA_SCHEMA_VERSION
from qim.errors import EngineError
from qim.stores.cql.session import DDL_TIMEOUT_S, CqlSession

COMPONENT = "qim"
RECORD_FIELDS = ("conversation_id blob, conversation_seq bigint, sender_id bigint, sender_device_id bigint, "
                 "client_message_id blob, message_type int, custom_type blob, body blob, created_at_ms bigint, "
                 "state int")

# version -> (description, statements); {ks} is the keyspace
MIGRATIONS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("archive tier: records, history index, archive bounds, user_conversation_state", (
        "CREATE TABLE IF NOT EXISTS {ks}.message_record (tenant blob, message_id blob, " + RECORD_FIELDS
        + ", PRIMARY KEY ((tenant, message_id))) WITH default_time_to_live = 0",
        "CREATE TABLE IF NOT EXISTS {ks}.conversation_history (tenant blob, bucket bigint, message_id blob, "
        + RECORD_FIELDS + ", PRIMARY KEY ((tenant, conversation_id, bucket), conversation_seq)) "
        "WITH CLUSTERING ORDER BY (conversation_seq DESC) AND default_time_to_live = 0",
        "CREATE TABLE IF NOT EXISTS {ks}.conversation_archive (tenant blob, conversation_id blob, max_seq bigint, "
        "PRIMARY KEY ((tenant, conversation_id))) WITH default_time_to_live = 0",
        "CREATE TABLE IF NOT EXISTS {ks}.user_conversation_state (tenant blob, user_id bigint, conversation_id blob, "
        "kind int, peer_user_id bigint, first_seen_at_ms bigint, PRIMARY KEY ((tenant, user_id), conversation_id)) "
        "WITH default_time_to_live = 0",
    )),
    # replies, mentions, edits (docs/decisions/0120): `ext` holds a MessageRecord with only
    # what the Outbox carried besides the v1 columns (reply, mentions, a recall's edit
    # trail); version, edited_at_ms and edit_controls (the edit notices' ids, a set: the
    # archiver may apply one twice) change with an edit
    2: ("replies, mentions and edits: ext, version, edited_at_ms, edit_controls on both record tables", (
        "ALTER TABLE {ks}.message_record ADD (ext blob, version int, edited_at_ms bigint, edit_controls set<blob>)",
        "ALTER TABLE {ks}.conversation_history ADD (ext blob, version int, edited_at_ms bigint, "
        "edit_controls set<blob>)",
    )),
}
assert max(MIGRATIONS) == SCYLLA_SCHEMA_VERSION


def replication(session: CqlSession, nodes: int = 1) -> str:
    """The keyspace's replication map as CQL text for a cluster of `nodes` nodes:
    NetworkTopologyStrategy RF 3 in the local DC; SimpleStrategy RF `nodes` only on a
    development cluster of fewer than 3 nodes with QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV=1."""
    cfg = session.cfg
    if cfg.allow_single_node_dev and nodes < 3:
        return "{'class': 'SimpleStrategy', 'replication_factor': %d}" % max(1, nodes)
    return "{'class': 'NetworkTopologyStrategy', '%s': 3}" % cfg.local_dc


async def cluster_nodes(session: CqlSession) -> int:
    """How many nodes the coordinator knows: itself plus its peers (system.peers)."""
    rows = await session.execute("SELECT peer FROM system.peers", None, "peer list")
    return 1 + len(rows)


def required_replicas(session: CqlSession, nodes: int) -> int:
    """The fewest replicas a keyspace may have: 3, or with QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV=1
    as many as the cluster has nodes, up to 3 (docs/decisions/0089)."""
    return min(3, max(1, nodes)) if session.cfg.allow_single_node_dev else 3


def _refusal(session: CqlSession, repl: dict, nodes: int) -> str | None:
    """Why the keyspace's replication `repl` is refused on `nodes` nodes, or None."""
    need = required_replicas(session, nodes)
    have = _replicas(repl)
    if have >= need:
        return None
    if session.cfg.allow_single_node_dev:
        return (f"keyspace {session.keyspace} has {have} replica(s) on a cluster of {nodes} nodes; "
                f"QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV=1 allows fewer than 3 only on a cluster that small: "
                f"ALTER KEYSPACE {session.keyspace} to replication_factor {need} and run a repair")
    return (f"keyspace {session.keyspace} has fewer than 3 replicas ({have}); set "
            "QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV=1 only for a single-node development cluster")


async def _versions(session: CqlSession) -> set[int]:
    rows = await session.execute(f"SELECT version FROM {session.keyspace}.schema_version WHERE component = %s",
                                 (COMPONENT,), "schema version")
    return {r[0] for r in rows}


async def _keyspace_replication(session: CqlSession) -> dict | None:
    rows = await session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                 (session.keyspace,), "keyspace read")
    return dict(rows[0][0]) if rows else None


def _replicas(repl: dict) -> int:
    """Replicas of a replication map (the largest DC's count for NetworkTopologyStrategy)."""
    counts = [int(v) for k, v in repl.items() if k not in ("class", "replication_factor")]
    if "replication_factor" in repl:
        counts.append(int(repl["replication_factor"]))
    return max(counts or [0])


async def apply(session: CqlSession) -> list[int]:
    """Create the keyspace if absent and run the missing migrations; returns the versions
    applied now (empty: already current). EngineError when the keyspace exists with
    fewer replicas than `required_replicas` (_refusal)."""
    ks = session.keyspace
    nodes = await cluster_nodes(session)
    await session.execute(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {replication(session, nodes)} "
                          "AND durable_writes = true", None, "create keyspace", DDL_TIMEOUT_S)
    repl = await _keyspace_replication(session)
    refusal = _refusal(session, repl, nodes) if repl is not None else None
    if refusal:
        raise EngineError(refusal)
    await session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.schema_version (component text, version int, "
                          "applied_at_ms bigint, description text, PRIMARY KEY (component, version))",
                          None, "create schema_version", DDL_TIMEOUT_S)
    done = await _versions(session)
    applied = []
    for version in sorted(MIGRATIONS):
        if version in done:
            continue
        description, statements = MIGRATIONS[version]
        for stmt in statements:
            if await _added_already(session, stmt):
                continue  # an ALTER of a migration cut short before it was recorded: run again, it would fail
            await session.execute(stmt.format(ks=ks), None, f"migration {version}", DDL_TIMEOUT_S)
        await session.execute(f"INSERT INTO {ks}.schema_version (component, version, applied_at_ms, description) "
                              "VALUES (%s, %s, %s, %s)", (COMPONENT, version, int(time.time() * 1000), description),
                              "record migration")
        applied.append(version)
    return applied


async def _added_already(session: CqlSession, stmt: str) -> bool:
    """Whether `stmt` is an `ALTER TABLE {ks}.T ADD (c type, ...)` whose first column the
    table has already (CQL has no ADD IF NOT EXISTS on every engine QIM runs on)."""
    m = re.match(r"ALTER TABLE \{ks\}\.(\w+) ADD \((\w+) ", stmt)
    if m is None:
        return False
    rows = await session.execute("SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND "
                                 "table_name = %s", (session.keyspace, m.group(1)), "read table columns")
    return any(r[0] == m.group(2) for r in rows)


async def check(session: CqlSession) -> None:
    """Refuse to run against a keyspace that is missing, not at SCYLLA_SCHEMA_VERSION, or
    with fewer replicas than `required_replicas` (EngineError naming the fix).
    StoreUnavailable when no node answers."""
    ks = session.keyspace
    repl = await _keyspace_replication(session)
    if repl is None:
        raise EngineError(f"keyspace {ks} does not exist: run `qimctl schema apply`")
    refusal = _refusal(session, repl, await cluster_nodes(session))
    if refusal:
        raise EngineError(refusal)
    rows = await session.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
                                 (ks,), "table list")
    if "schema_version" not in {r[0] for r in rows}:
        raise EngineError(f"keyspace {ks} has no schema_version table: run `qimctl schema apply`")
    versions = await _versions(session)
    top = max(versions or {0})
    if top < SCYLLA_SCHEMA_VERSION:
        raise EngineError(f"keyspace {ks} is at schema version {top}, this build needs {SCYLLA_SCHEMA_VERSION}: "
                          "run `qimctl schema apply`")
    if top > SCYLLA_SCHEMA_VERSION:
        raise EngineError(f"keyspace {ks} is at schema version {top}, newer than this build "
                          f"({SCYLLA_SCHEMA_VERSION}): upgrade the binaries")
