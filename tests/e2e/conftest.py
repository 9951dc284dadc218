"""End-to-end fixtures: the four QIM services as real processes on the session engines.

`stack` (session): writer, mailbox, gateway and fanout started by qim.dev.stack against
the `engines` fixture; a service that cannot start FAILS the tests (never skips).
`fresh_stack` (function): private engines and services of the test's own, for tests that
need untouched partitions or will kill something.
"""

from __future__ import annotations

import pytest

from qim.dev.stack import stack_up
from qim.errors import EngineError
from tests.fixtures import running_stack

AUTH_TIMEOUT_MS = 5000  # silent unauthenticated connections close fast; also the TLS handshake bound, which a loaded CI host needs


def _up(path, env):
    try:
        return stack_up(path, env, die_with_parent=True, extra_env={"QIM_AUTH_TIMEOUT_MS": str(AUTH_TIMEOUT_MS)}), None
    except EngineError as exc:
        return None, str(exc)


@pytest.fixture(scope="session")
def stack(engines, tmp_path_factory):
    st, err = _up(tmp_path_factory.mktemp("stack"), engines.env())
    if err:
        pytest.fail(f"QIM services could not start: {err}", pytrace=False)
    yield st
    st.down()


@pytest.fixture
def fresh_stack(tmp_path):
    with running_stack(tmp_path) as st:
        yield st
