"""A private stack with two gateways for the reaction and typing tests (decision 0121):
device 1 of every user on the first gateway, device 2 on the second, so every live
event crosses gateways (EPHEMERAL_FRAMES) as well as staying on one."""

from __future__ import annotations

import pytest

from tests.fixtures import running_stack


@pytest.fixture(scope="session")
def two_gateways(tmp_path_factory):
    """Private engines and services, two gateways (module doc); one per test process (pytest-xdist worker)."""
    with running_stack(tmp_path_factory.mktemp("reactions"), nodes={"gateway": 2}) as st:
        yield st
