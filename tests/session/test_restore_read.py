"""A cold list read with the archive tier (docs/decisions/0065): a set not marked checked
is completed from user_conversation_state first; a CQL failure fails only the page of an
empty set, and a set Redis holds is served as it is (counted, left unmarked)."""

from __future__ import annotations

import pytest

from qim.services.session.cache import SessionListCache
from qim.services.session.metrics import SessionMetrics
from qim.services.session.service import SessionService
from qim.stores.errors import StoreUnavailable

HELD = [(1000, b"aa" * 16)]
COMPLETED = [(1000, b"aa" * 16), (2000, b"bb" * 16)]


class Sessions:
    def __init__(self, asc, checked: bool) -> None:
        self.asc, self.checked = list(asc), checked

    async def checked_conversations(self, tenant, user):
        return list(self.asc), self.checked

    async def conversations(self, tenant, user):
        return list(self.asc)


def service(sessions: Sessions, restore, metrics: SessionMetrics) -> SessionService:
    return SessionService(None, None, sessions, None, SessionListCache(60.0), lambda *a: None, lambda *a: "",
                          metrics, restore)


async def test_an_unchecked_set_is_completed_and_a_checked_one_is_not_read_again():
    calls = []
    sessions = Sessions(HELD, False)

    async def restore(tenant, user, known):
        calls.append(known)
        sessions.asc = COMPLETED
        return 1

    svc = service(sessions, restore, SessionMetrics())
    assert await svc._read_set(0, 5) == COMPLETED and calls == [frozenset({b"aa" * 16})]
    sessions.checked = True
    assert await svc._read_set(0, 5) == COMPLETED and len(calls) == 1


async def test_a_cql_outage_serves_the_set_redis_holds_and_fails_only_an_empty_one():
    async def restore(tenant, user, known):
        raise StoreUnavailable("cql down")

    metrics = SessionMetrics()
    assert await service(Sessions(HELD, False), restore, metrics)._read_set(0, 5) == HELD
    assert metrics.value("qim_session_list_restore_failures_total") == 1
    with pytest.raises(StoreUnavailable):
        await service(Sessions([], False), restore, metrics)._read_set(0, 5)
