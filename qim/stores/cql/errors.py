"""The one error table of the CQL backend (docs/decisions/0023): scylla-driver exceptions become the
typed errors of qim/stores/errors.py HERE, once (like qim/stores/redis/errors.py). No
other module catches a driver exception; services never see one.

A node that is down, overloaded, bootstrapping or timing out is StoreUnavailable (retry:
nothing was acknowledged, and every archive write is idempotent). A request the server
refuses as invalid (an unconfigured table: the schema was not applied) is StoreCorrupt
with the server's message, which names no data."""

from __future__ import annotations

import cassandra
from cassandra import cluster as cql_cluster
from cassandra.connection import ConnectionException

from qim.stores.errors import StorageError, StoreCorrupt, StoreUnavailable

# driver exception class -> store error, first match wins (subclasses first)
EXCEPTION_CLASSES: tuple[tuple[type[BaseException], type[StorageError]], ...] = (
    (cassandra.InvalidRequest, StoreCorrupt),  # schema missing or not as expected
    (cassandra.Unauthorized, StoreCorrupt),
    (cassandra.ConfigurationException, StoreCorrupt),
    (cql_cluster.NoHostAvailable, StoreUnavailable),  # every node down or refusing
    (cassandra.OperationTimedOut, StoreUnavailable),  # client-side timeout
    (cassandra.Timeout, StoreUnavailable),  # ReadTimeout / WriteTimeout from the coordinator
    (cassandra.Unavailable, StoreUnavailable),  # not enough replicas alive
    (cassandra.CoordinationFailure, StoreUnavailable),  # ReadFailure / WriteFailure
    (ConnectionException, StoreUnavailable),
    (cassandra.DriverException, StoreUnavailable),
    (OSError, StoreUnavailable),
)


def translate(exc: BaseException, operation: str) -> StorageError:
    """The store error for a driver exception raised by `operation`."""
    for cls, err in EXCEPTION_CLASSES:
        if isinstance(exc, cls):
            detail = str(exc).splitlines()[0][:200] if str(exc) else cls.__name__
            return err(f"cql {operation}: {type(exc).__name__}: {detail}")
    return StoreUnavailable(f"cql {operation}: {type(exc).__name__}")


def is_driver_error(exc: BaseException) -> bool:
    """Whether `exc` is one the table maps (anything else is a bug and propagates)."""
    return any(isinstance(exc, cls) for cls, _ in EXCEPTION_CLASSES)
