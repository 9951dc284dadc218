"""Archive-tier half of `qimctl backup` / `qimctl restore` (docs/operations.md "Backup and
restore"; docs/decisions/0037-ops-backups.md): every table of the keyspace read through
CQL, every cell with its write time and TTL, so the restored rows behave as the old
ones (the tier's rule "the later write time wins", qim/stores/cql/archive.py, keeps
holding when the archiver writes a row again after the restore; a row keeps its expiry).

- `export(cfg, dir)`: DIR/cql/<table>.jsonl, one header line {"columns", "types",
  "keys"} and one line per row [values, write times, TTLs] (blobs as hex; write time and
  TTL per regular column). Paged reads (PAGE_ROWS), nothing locked: taken AFTER the
  Redis snapshot, the archive is a superset of what that snapshot trimmed from Redis.
- `restore(cfg, dir, left_out, seq_of)`: into an EMPTY keyspace (created by the schema
  migrations, refused when it holds messages): each row as one INSERT per (write time,
  TTL) group of its cells. Rows of the messages the restore leaves out (`left_out`,
  message ids reserved after the backup point) are not written, and an archive bound
  above its conversation's restored sequence (`seq_of(tenant, conversation_id)`) comes
  down to it (the next send reuses those sequences).

The scylla-driver is used synchronously here (a command-line tool, no event loop); its
errors become the store errors of qim/stores/cql/errors.py, StoreUnavailable /
StoreCorrupt (EngineError for a non-empty target).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable, Iterator

from qim.config.tier import ScyllaConfig
from qim.errors import EngineError
from qim.stores.cql.errors import is_driver_error, translate

PAGE_ROWS = 1000
WRITE_CONCURRENCY = 64
SKIP_TABLES = ("schema_version",)  # written by the migrations the restore runs
ENCODED: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "blob": (bytes.hex, bytes.fromhex),
    # a set's elements in the driver's (the cells') order: WRITETIME and TTL of a non-frozen
    # collection are one per element in that order (Cassandra 5)
    "set<blob>": (lambda v: [b.hex() for b in v], lambda v: [bytes.fromhex(x) for x in v]),
}
COLLECTIONS = ("set<blob>",)  # restored element by element, `c = c + {e}` at its own time
PLAIN = ("bigint", "int", "text", "boolean", "smallint", "tinyint", "varint", "ascii", "double", "float")
MESSAGE_TABLES = ("message_record", "conversation_history")  # rows name a message_id
BOUND_TABLE = "conversation_archive"


class _Cql:
    """A connected driver session; `run(what, fn, *args)` translates driver errors."""

    def __init__(self, cfg: ScyllaConfig) -> None:
        from qim.stores.cql.session import build_cluster

        self.cfg, self.ks = cfg, cfg.keyspace
        self.cluster = build_cluster(cfg)
        self.session = self.run("connect", self.cluster.connect)

    def run(self, what: str, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            if is_driver_error(exc):
                raise translate(exc, what) from exc
            raise

    def rows(self, cql: str, params: tuple = (), what: str = "backup read") -> Iterator:
        from cassandra.query import SimpleStatement

        result = self.run(what, self.session.execute, SimpleStatement(cql, fetch_size=PAGE_ROWS), params)
        it = iter(result)
        while True:  # the next page is fetched inside next(): its errors are translated too
            try:
                row = self.run(what, next, it)
            except StopIteration:
                return
            yield row

    def close(self) -> None:
        self.cluster.shutdown()


def _layout(db: _Cql, table: str) -> tuple[list[str], list[str], list[str]]:
    """(columns, types, key columns) of `table`, keys first in CQL order."""
    rows = list(db.rows("SELECT column_name, kind, position, type FROM system_schema.columns "
                        "WHERE keyspace_name = %s AND table_name = %s", (db.ks, table), "schema read"))
    order = {"partition_key": 0, "clustering": 1, "regular": 2, "static": 2}
    rows.sort(key=lambda r: (order[r[1]], r[2], r[0]))
    for name, _, _, typ in rows:
        if typ not in PLAIN and typ not in ENCODED:
            raise EngineError(f"backup: column {table}.{name} has type {typ}, which qimctl backup does not carry")
    keys = [r[0] for r in rows if r[1] in ("partition_key", "clustering")]
    return [r[0] for r in rows], [r[3] for r in rows], keys


def _add_elements(adds: dict[str, list[tuple]], table: str, keys: list[str], c: str, row: dict,
                  times: Any, ttls: Any) -> None:
    """One `c = c + {e}` per element of the collection `row[c]`, each at its own write time
    and TTL (lists aligned with the elements; a single value stands for all of them)."""
    elems = list(row[c])
    ts = times if isinstance(times, list) else [times] * len(elems)
    ls = ttls if isinstance(ttls, list) else [ttls] * len(elems)
    if len(ts) != len(elems) or len(ls) != len(elems):
        raise EngineError(f"restore: {table}.{c} has {len(elems)} elements but {len(ts)} write times")
    for e, t, ttl in zip(elems, ts, ls):
        adds.setdefault(c, []).append((ttl or 0, t, {e}, *(row[k] for k in keys)))


def _tables(db: _Cql) -> list[str]:
    names = [r[0] for r in db.rows("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
                                   (db.ks,), "schema read")]
    if not names:
        raise EngineError(f"backup: keyspace {db.ks} has no tables (qimctl schema apply was never run here)")
    return sorted(n for n in names if n not in SKIP_TABLES)


def export(cfg: ScyllaConfig, dir: Path) -> dict[str, int]:
    """Write every table of `cfg.keyspace` under `dir`; {table: rows}."""
    dir.mkdir(parents=True)
    db = _Cql(cfg)
    try:
        counts = {}
        for table in _tables(db):
            cols, types, keys = _layout(db, table)
            regular = [c for c in cols if c not in keys]
            sel = ", ".join([*cols, *(f"WRITETIME({c})" for c in regular), *(f"TTL({c})" for c in regular)])
            n = 0
            with open(dir / f"{table}.jsonl", "w") as f:
                f.write(json.dumps({"columns": cols, "types": types, "keys": keys}) + "\n")
                for row in db.rows(f"SELECT {sel} FROM {db.ks}.{table}"):
                    values = [None if v is None else ENCODED[t][0](v) if t in ENCODED else v
                              for v, t in zip(row[:len(cols)], types)]
                    f.write(json.dumps([values, list(row[len(cols):len(cols) + len(regular)]),
                                        list(row[len(cols) + len(regular):])]) + "\n")
                    n += 1
            counts[table] = n
        return counts
    finally:
        db.close()


def _apply_schema(cfg: ScyllaConfig) -> None:
    from qim.stores.cql.backend import CqlBackend

    async def run() -> None:
        backend = CqlBackend(cfg)
        try:
            await backend.apply_schema()
        finally:
            await backend.close()

    asyncio.run(run())


def check_empty(cfg: ScyllaConfig) -> None:
    """EngineError when `cfg.keyspace` holds messages (an absent keyspace is empty): run
    before anything is restored, so a refused restore changes nothing."""
    db = _Cql(cfg)
    try:
        tables = {r[0] for r in db.rows("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
                                        (db.ks,), "restore check")}
        if "message_record" in tables and list(db.rows(f"SELECT message_id FROM {db.ks}.message_record LIMIT 1",
                                                       (), "restore check")):
            raise EngineError(f"restore: keyspace {db.ks} already holds messages: restore needs an empty one")
    finally:
        db.close()


def restore(cfg: ScyllaConfig, dir: Path, left_out: set[bytes],
            seq_of: Callable[[bytes, bytes], int]) -> dict[str, int]:
    """The tables under `dir` into `cfg.keyspace` (module doc); {table: rows written}."""
    from cassandra.concurrent import execute_concurrent_with_args

    check_empty(cfg)
    _apply_schema(cfg)
    db = _Cql(cfg)
    try:
        counts = {}
        for path in sorted(dir.glob("*.jsonl")):
            table = path.stem
            with open(path) as f:
                head = json.loads(f.readline())
                cols, types, keys = head["columns"], head["types"], head["keys"]
                regular = [c for c in cols if c not in keys]
                kinds = dict(zip(cols, types))
                calls: dict[tuple[str, ...], list[tuple]] = {}
                adds: dict[str, list[tuple]] = {}  # collection column -> (ttl, time, {element}, *keys)
                n = 0
                for line in f:
                    values, times, ttls = json.loads(line)
                    row = dict(zip(cols, (None if v is None else ENCODED[t][1](v) if t in ENCODED else v
                                          for v, t in zip(values, types))))
                    if table in MESSAGE_TABLES and row.get("message_id") in left_out:
                        continue
                    if table == BOUND_TABLE:
                        top = seq_of(row["tenant"], row["conversation_id"])
                        if row["max_seq"] > top:
                            if top <= 0:
                                continue
                            row["max_seq"], times = top, [top] * len(times)  # write time = max_seq (the tier's rule)
                    groups: dict[tuple[int, int], list[str]] = {}
                    for c, t, ttl in zip(regular, times, ttls):
                        if row[c] is None:
                            continue
                        if kinds[c] in COLLECTIONS:
                            _add_elements(adds, table, keys, c, row, t, ttl)
                        else:
                            groups.setdefault((t, ttl or 0), []).append(c)
                    for (t, ttl), group in sorted(groups.items()):
                        names = tuple([*keys, *group])
                        calls.setdefault(names, []).append((*(row[c] for c in names), ttl, t))
                    n += 1
            for names, args in calls.items():
                stmt = db.run("prepare", db.session.prepare,
                              f"INSERT INTO {db.ks}.{table} ({', '.join(names)}) VALUES "
                              f"({', '.join('?' for _ in names)}) USING TTL ? AND TIMESTAMP ?")
                for ok, res in db.run("restore write", execute_concurrent_with_args, db.session, stmt, args,
                                      WRITE_CONCURRENCY, False):
                    if not ok:
                        raise translate(res, "restore write") if is_driver_error(res) else res
            for c, args in adds.items():
                stmt = db.run("prepare", db.session.prepare,
                              f"UPDATE {db.ks}.{table} USING TTL ? AND TIMESTAMP ? SET {c} = {c} + ? WHERE "
                              + " AND ".join(f"{k} = ?" for k in keys))
                for ok, res in db.run("restore write", execute_concurrent_with_args, db.session, stmt, args,
                                      WRITE_CONCURRENCY, False):
                    if not ok:
                        raise translate(res, "restore write") if is_driver_error(res) else res
            counts[table] = n
        return counts
    finally:
        db.close()
