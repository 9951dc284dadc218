"""Tables of the CQL MailboxStore (docs/decisions/0102-cql-mailbox-store.md), kept as a
component of their own in `schema_version` ("mailbox") beside the archive tier's, so the
archive's migrations and these never share a version number.

Tables (tenant/user bigint, offsets bigint: 48-bit log offsets):
- mailbox_entry ((tenant, user_id, day), log_offset): one entry (mailbox_seq ‖ event
  group) per user per dispatch record, a partition per user per UTC day of created_at
  (the Redis day bucket); each row's TTL ends a retention after its day (+ CLOCK_GRACE);
- mailbox_days ((tenant, user_id), day): the day index, `hi` = the day's highest offset,
  written USING TIMESTAMP hi (the highest wins in any order); the static `trim` column is
  the persisted trim boundary, written USING TIMESTAMP trim (monotone the same way);
- mailbox_dispatch ((shard, dispatch_id)): the dispatch identity (digest, first
  mailbox_seq, first offset), written USING TIMESTAMP 2^48-1-offset (the EARLIEST
  observation wins), TTL IDENTITY_TTL_S (31 days), never collected otherwise;
- mailbox_shard_frontier ((shard), epoch DESC): per owner_epoch the watermark blob,
  layout, shard_epoch, writer token and frontier_offset (the offset of the last record
  materialized), written USING TIMESTAMP frontier_offset; the highest epoch's row is the
  shard's watermark (fencing without LWT).

`apply` is run by `qimctl schema apply` (CqlBackend.apply_schema) with the archive's;
`check` only by processes whose QIM_MAILBOX_STORE is cql.
"""

from __future__ import annotations

import time

from qim.errors import EngineError
from qim.stores.cql.session import DDL_TIMEOUT_S, CqlSession

COMPONENT = "mailbox"
MAILBOX_SCHEMA_VERSION = 1
IDENTITY_TTL_S = 31 * 86_400  # the dispatch identity rows' TTL (decision 0102)

MIGRATIONS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: (
        "CQL MailboxStore: entries, day index, dispatch identity, shard frontier",
        (
            "CREATE TABLE IF NOT EXISTS {ks}.mailbox_entry (tenant bigint, user_id bigint, day int, "
            "log_offset bigint, entry blob, PRIMARY KEY ((tenant, user_id, day), log_offset))",
            "CREATE TABLE IF NOT EXISTS {ks}.mailbox_days (tenant bigint, user_id bigint, day int, hi bigint, "
            "trim bigint static, PRIMARY KEY ((tenant, user_id), day))",
            "CREATE TABLE IF NOT EXISTS {ks}.mailbox_dispatch (shard int, dispatch_id blob, digest blob, seq blob, "
            "first_offset bigint, PRIMARY KEY ((shard, dispatch_id)))",
            "CREATE TABLE IF NOT EXISTS {ks}.mailbox_shard_frontier (shard int, epoch bigint, wm blob, layout int, "
            "shard_epoch bigint, writer blob, frontier_offset bigint, PRIMARY KEY ((shard), epoch)) "
            "WITH CLUSTERING ORDER BY (epoch DESC)",
        ),
    ),
}
# table -> its partition key columns
PARTITION_KEYS = {
    "mailbox_entry": ("tenant", "user_id", "day"),
    "mailbox_days": ("tenant", "user_id"),
    "mailbox_dispatch": ("shard", "dispatch_id"),
    "mailbox_shard_frontier": ("shard",),
}


async def _versions(session: CqlSession) -> set[int]:
    rows = await session.execute(
        f"SELECT version FROM {session.keyspace}.schema_version WHERE component = %s",
        (COMPONENT,),
        "mailbox schema version",
    )
    return {r[0] for r in rows}


async def _tables(session: CqlSession) -> set[str]:
    rows = await session.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
                                 (session.keyspace,), "mailbox table list")
    return {r[0] for r in rows}


async def apply(session: CqlSession) -> list[int]:
    """Create the mailbox tables in the keyspace (which `schema.apply` created with the
    schema_version table first); returns the mailbox migration versions applied now. A
    table missing behind a recorded version (dropped by hand) is created again: its
    statements are CREATE ... IF NOT EXISTS, so `check`'s "run `qimctl schema apply`" fixes it."""
    ks = session.keyspace
    done = await _versions(session)
    lost = bool(set(PARTITION_KEYS) - await _tables(session))
    applied = []
    for version in sorted(MIGRATIONS):
        if version in done and not lost:
            continue
        description, statements = MIGRATIONS[version]
        for stmt in statements:
            await session.execute(stmt.format(ks=ks), None, f"mailbox migration {version}", DDL_TIMEOUT_S)
        if version in done:
            continue
        await session.execute(
            f"INSERT INTO {ks}.schema_version (component, version, applied_at_ms, description) VALUES (%s, %s, %s, %s)",
            (COMPONENT, version, int(time.time() * 1000), description),
            "record mailbox migration",
        )
        applied.append(version)
    return applied


async def check(session: CqlSession) -> None:
    """EngineError naming `qimctl schema apply` unless the mailbox tables are at
    MAILBOX_SCHEMA_VERSION and every one of them (PARTITION_KEYS) exists (run after the
    archive's `schema.check`): a table dropped behind a recorded version is refused at
    start, not met as an error on the first materialized record."""
    missing = sorted(set(PARTITION_KEYS) - await _tables(session))
    if missing:
        raise EngineError(f"keyspace {session.keyspace} has no mailbox table {', '.join(missing)}: "
                          "run `qimctl schema apply`")
    top = max(await _versions(session) or {0})
    if top < MAILBOX_SCHEMA_VERSION:
        raise EngineError(
            f"keyspace {session.keyspace} has mailbox schema version {top}, QIM_MAILBOX_STORE=cql "
            f"needs {MAILBOX_SCHEMA_VERSION}: run `qimctl schema apply`"
        )
    if top > MAILBOX_SCHEMA_VERSION:
        raise EngineError(
            f"keyspace {session.keyspace} has mailbox schema version {top}, newer than this build "
            f"({MAILBOX_SCHEMA_VERSION}): upgrade the binaries"
        )
