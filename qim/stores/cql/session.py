"""One scylla-driver Cluster and Session per process, bridged to asyncio (docs/decisions/0023).

The driver runs its own I/O thread (libev); `execute_async` returns a ResponseFuture
whose callbacks fire on that thread, so results reach the event loop through
`call_soon_threadsafe` and nothing blocks the loop. The blocking calls (connect,
prepare, shutdown) run in the default executor.

Routing: on loopback contact points (development) only those hosts are used (the
driver would otherwise try peers it discovers on the contact port); elsewhere
token-aware over DC-aware round robin in QIM_SCYLLA_LOCAL_DC. Consistency LOCAL_QUORUM
(docs/design.md §8); paging is off (every query of the tier is bounded by a LIMIT or a key).
CQL protocol v4, the newest ScyllaDB speaks.

A frozen node (a long GC pause, a stalled disk, SIGSTOP) keeps its connections open, so
the driver does not mark it down for tens of seconds, and a request it coordinates would
wait the whole REQUEST_TIMEOUT_S. Every statement of the tier is idempotent (explicit
write times and fixed values, no LWT, no counter), so prepared statements and batches
are marked so and the profile speculatively sends a request that has no answer after
SPECULATIVE_DELAY_S to the next node of the plan (at most SPECULATIVE_ATTEMPTS more):
with one of three nodes frozen, LOCAL_QUORUM still answers in seconds
(docs/decisions/0090).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Iterable, Optional, Sequence

from qim.config.tier import ScyllaConfig
from qim.stores.cql.errors import is_driver_error, translate

CQL_PROTOCOL_VERSION = 4
REQUEST_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5.0
# a healthy coordinator answers (a result, or WriteTimeout / ReadTimeout) within its own
# request timeouts (2 s write, 5 s read by default); 2 s without a word is a frozen node
SPECULATIVE_DELAY_S = 2.0
SPECULATIVE_ATTEMPTS = 2
# a schema change waits for the coordinator to apply and announce it: seconds on a
# loaded cluster of three (qimctl schema apply only, never the request path)
DDL_TIMEOUT_S = 60.0


def build_cluster(cfg: ScyllaConfig) -> Any:
    """A driver Cluster for `cfg` (not connected)."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import (
        ConstantSpeculativeExecutionPolicy,
        DCAwareRoundRobinPolicy,
        TokenAwarePolicy,
        WhiteListRoundRobinPolicy,
    )
    from cassandra.query import tuple_factory

    policy: Any
    if cfg.loopback:
        policy = WhiteListRoundRobinPolicy(list(cfg.hosts))
    else:
        policy = TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=cfg.local_dc))
    profile = ExecutionProfile(load_balancing_policy=policy, request_timeout=REQUEST_TIMEOUT_S,
                               consistency_level=ConsistencyLevel.LOCAL_QUORUM,
                               serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL,
                               row_factory=tuple_factory,
                               speculative_execution_policy=ConstantSpeculativeExecutionPolicy(
                                   SPECULATIVE_DELAY_S, SPECULATIVE_ATTEMPTS))
    return Cluster(list(cfg.hosts), port=cfg.port, protocol_version=CQL_PROTOCOL_VERSION,
                   execution_profiles={EXEC_PROFILE_DEFAULT: profile}, connect_timeout=CONNECT_TIMEOUT_S,
                   control_connection_timeout=CONNECT_TIMEOUT_S)


def partition_batch(calls: Sequence[tuple[Any, Sequence[Any]]]) -> Any:
    """One UNLOGGED batch of (prepared statement, params) that all write ONE partition:
    a single mutation at each replica, no batchlog, no coordinator fan-out (a batch over
    several partitions would cost the coordinator more than the requests it saves). The
    consistency is the execution profile's. Run it through `execute_many` with params None."""
    from cassandra.query import BatchStatement, BatchType

    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    batch.is_idempotent = True  # its rows carry their write times: sent twice, nothing changes
    for stmt, params in calls:
        batch.add(stmt, params)
    return batch


def _resolve(fut: asyncio.Future, result: Any, failed: bool) -> None:
    if fut.done():
        return
    if failed:
        fut.set_exception(result)
    else:
        fut.set_result(result)


class CqlSession:
    """`await open()`, then `prepare`/`execute`; every driver error leaves as a typed store
    error (qim/stores/cql/errors.py). Statements name their keyspace explicitly."""

    def __init__(self, cfg: ScyllaConfig) -> None:
        self.cfg = cfg
        self.keyspace = cfg.keyspace
        self._cluster: Any = None
        self._session: Any = None
        self._prepared: dict[str, Any] = {}
        self._opening: Optional[asyncio.Task] = None

    async def open(self) -> None:
        """Connect (idempotent, concurrent callers share one attempt); StoreUnavailable
        when no contact point answers."""
        if self._session is not None:
            return
        if self._opening is None or self._opening.done() and self._opening.exception() is not None:
            self._opening = asyncio.get_running_loop().create_task(self._connect())
        await asyncio.shield(self._opening)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        cluster = build_cluster(self.cfg)
        try:
            session = await loop.run_in_executor(None, cluster.connect)
        except Exception as exc:
            await loop.run_in_executor(None, cluster.shutdown)
            if is_driver_error(exc):
                raise translate(exc, "connect") from exc
            raise
        session.default_fetch_size = None  # bounded queries only: no paging
        self._cluster, self._session = cluster, session

    async def prepare(self, cql: str) -> Any:
        """The prepared statement of `cql` (cached per text; prepared once)."""
        stmt: Any = self._prepared.get(cql)
        if stmt is not None:
            return stmt
        await self.open()
        try:
            stmt = await asyncio.get_running_loop().run_in_executor(None, self._session.prepare, cql)
        except Exception as exc:
            if is_driver_error(exc):
                raise translate(exc, "prepare") from exc
            raise
        # every statement of the tier is idempotent (module docstring): speculative retries
        stmt.is_idempotent = True
        self._prepared[cql] = stmt
        return stmt

    async def execute(self, stmt: Any, params: Optional[Sequence[Any]] = None, what: str = "query",
                      timeout: Optional[float] = None) -> list:
        """Run one statement (text or prepared) -> its rows as tuples; `timeout` (s)
        replaces the profile's REQUEST_TIMEOUT_S (schema changes: DDL_TIMEOUT_S)."""
        if self._session is None:
            await self.open()
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        try:
            rf = self._session.execute_async(stmt, params, **({"timeout": timeout} if timeout else {}))
        except Exception as exc:
            if is_driver_error(exc):
                raise translate(exc, what) from exc
            raise
        rf.add_callbacks(lambda rows: loop.call_soon_threadsafe(_resolve, fut, rows, False),
                         lambda exc: loop.call_soon_threadsafe(_resolve, fut, exc, True))
        try:
            rows = await fut
        except Exception as exc:
            if is_driver_error(exc):
                raise translate(exc, what) from exc
            raise
        return list(rows or [])

    async def execute_many(self, calls: Iterable[tuple[Any, Sequence[Any]]], concurrency: int,
                           what: str = "write") -> int:
        """Run every (statement, params) with at most `concurrency` in flight; waits for all
        of them, then raises the first error (typed). Returns how many ran.

        The requests are chained in the driver's own callbacks (_Chain) and the event loop
        is woken once for the whole set: one asyncio task, future and loop wake-up per
        statement cost the archiver about as much CPU as the driver's request work
        (docs/decisions/0053-kafka-idle-and-batching.md)."""
        calls = list(calls)
        if not calls:
            return 0
        if self._session is None:
            await self.open()
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        _Chain(self._session, calls, concurrency, lambda first: loop.call_soon_threadsafe(
            _resolve, fut, first, first is not None)).pump()
        try:
            await fut
        except Exception as exc:
            if is_driver_error(exc):
                raise translate(exc, what) from exc
            raise
        return len(calls)

    async def execute_all(self, stmt: Any, params: Sequence[Sequence[Any]], concurrency: int,
                          what: str = "read") -> list[list]:
        """Run `stmt` once per params (at most `concurrency` in flight); the rows of each,
        in order. Raises the first error (typed) after all ended."""
        sem = asyncio.Semaphore(concurrency)

        async def one(p: Sequence[Any]) -> list:
            async with sem:
                return await self.execute(stmt, p, what)

        results = await asyncio.gather(*(one(p) for p in params), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results  # type: ignore[return-value]

    async def ping(self) -> None:
        """Return when a node answers a local read; StoreUnavailable otherwise."""
        await self.execute("SELECT release_version FROM system.local", None, "ping")

    async def close(self) -> None:
        """Shut the driver down (off the event loop)."""
        cluster, self._cluster, self._session = self._cluster, None, None
        self._prepared.clear()
        if cluster is not None:
            await asyncio.get_running_loop().run_in_executor(None, cluster.shutdown)


class _Chain:
    """Statements run on the driver's callbacks, at most `concurrency` in flight: each
    completion starts the next one; `finished(first error or None)` is called once, on
    the thread of the last completion, when every statement ended. Each request keeps the
    execution profile's timeout (REQUEST_TIMEOUT_S), so the chain always ends."""

    def __init__(self, session: Any, calls: list, concurrency: int, finished: Callable[[Any], object]) -> None:
        self._session, self._calls, self._limit, self._finished = session, calls, max(1, concurrency), finished
        self._lock = threading.Lock()
        self._next = self._in_flight = self._done = 0
        self._first: Any = None
        self._pumping = False

    def pump(self) -> None:
        """Start statements while slots are free. A completion inside execute_async (a
        request that failed at once) re-enters here; the outer frame's loop starts the
        next one instead, so a burst of immediate failures never recurses."""
        with self._lock:
            if self._pumping:
                return
            self._pumping = True
        while True:
            with self._lock:
                if self._next >= len(self._calls) or self._in_flight >= self._limit:
                    self._pumping = False
                    return
                stmt, params = self._calls[self._next]
                self._next += 1
                self._in_flight += 1
            try:
                rf = self._session.execute_async(stmt, params)
                rf.add_callbacks(self._ok, self._failed)
            except Exception as exc:  # refused before it was sent (no host, bad values)
                self._complete(exc)

    def _ok(self, _rows: Any) -> None:
        self._complete(None)

    def _failed(self, exc: BaseException) -> None:
        self._complete(exc)

    def _complete(self, exc: Optional[BaseException]) -> None:
        with self._lock:
            self._in_flight -= 1
            self._done += 1
            if exc is not None and self._first is None:
                self._first = exc
            last = self._done == len(self._calls)
        if last:
            self._finished(self._first)
        else:
            self.pump()
