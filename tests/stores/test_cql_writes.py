"""CqlSession.execute_many (the archiver's and the conversation-state writes): every
statement runs, at most `concurrency` at once, on the driver's callbacks; a failed one is
raised as the typed store error after all ran. The driver session is a fake whose
requests complete on another thread, like the driver's I/O thread: pure logic.
A request refused before it is sent (the driver raises at once) is a failure too."""

from __future__ import annotations

import threading

import pytest
from cassandra import WriteTimeout

from qim.config.tier import ScyllaConfig
from qim.stores.cql.session import CqlSession
from qim.stores.errors import StoreUnavailable


class FakeFuture:
    """A ResponseFuture that completes on a thread of its own."""

    def __init__(self, driver: "FakeDriver", params) -> None:
        self.driver, self.params = driver, params

    def add_callbacks(self, callback, errback):
        def complete() -> None:
            with self.driver.lock:
                self.driver.running -= 1
                self.driver.done.append(self.params)
            if self.params in self.driver.fail:
                errback(WriteTimeout("timed out", write_type=0))
            else:
                callback([])

        threading.Timer(0.001, complete).start()


class FakeDriver:
    """The driver Session's execute_async, counting requests in flight."""

    def __init__(self, fail=()) -> None:
        self.lock = threading.Lock()
        self.running = self.peak = 0
        self.done: list = []
        self.fail = set(fail)

    def execute_async(self, stmt, params):
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        if params == ("refused",):
            with self.lock:
                self.running -= 1
                self.done.append(params)
            raise WriteTimeout("no connection", write_type=0)
        return FakeFuture(self, params)


def _session(driver: FakeDriver) -> CqlSession:
    s = CqlSession(ScyllaConfig(("127.0.0.1",), 1, "qim_none", allow_single_node_dev=True))
    s._session = driver
    return s


async def test_every_write_runs_bounded() -> None:
    driver = FakeDriver()
    calls = [("INSERT", (n,)) for n in range(300)]
    assert await _session(driver).execute_many(calls, 16, "archive records") == 300
    assert sorted(driver.done) == [(n,) for n in range(300)]
    assert 1 < driver.peak <= 16
    assert await _session(driver).execute_many([], 16) == 0


async def test_a_failed_write_is_a_typed_error_after_all_ran() -> None:
    driver = FakeDriver(fail={(7,), (9,)})
    with pytest.raises(StoreUnavailable, match="cql archive index: WriteTimeout"):
        await _session(driver).execute_many([("INSERT", (n,)) for n in range(50)], 8, "archive index")
    assert len(driver.done) == 50  # nothing left unsent behind the failure: the batch is retried whole


async def test_writes_refused_at_once_end_the_set() -> None:
    driver = FakeDriver()
    calls = [("INSERT", ("refused",))] * 2000 + [("INSERT", (1,))]  # no recursion per refusal
    with pytest.raises(StoreUnavailable, match="no connection"):
        await _session(driver).execute_many(calls, 32, "conversation state")
    assert len(driver.done) == 2001
