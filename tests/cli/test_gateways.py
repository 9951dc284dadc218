"""qim/cli/gateways.py: load generators spread their clients over every gateway."""

import pytest

from qim.cli.gateways import gateway_for, parse_gateways
from qim.errors import ConfigError


def test_parse_lists_addresses_and_names_a_bad_one():
    assert parse_gateways("127.0.0.1:1, 127.0.0.1:2") == ("127.0.0.1:1", "127.0.0.1:2")
    assert parse_gateways("127.0.0.1:1") == ("127.0.0.1:1",)
    with pytest.raises(ConfigError):
        parse_gateways(" , ")
    with pytest.raises(ConfigError, match="nonsense"):
        parse_gateways("127.0.0.1:1,nonsense")


def test_users_spread_evenly_and_stick():
    gws = ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
    counts = {g: 0 for g in gws}
    for u in range(3000):
        counts[gateway_for(u, gws)] += 1
        assert gateway_for(u, gws) == gateway_for(u, gws)
    assert all(800 < c < 1200 for c in counts.values()), counts
    # removing a gateway moves only the users it held
    moved = sum(1 for u in range(3000) if gateway_for(u, gws) != "127.0.0.1:3"
                and gateway_for(u, gws[:2]) != gateway_for(u, gws))
    assert moved == 0
    # a user's devices spread too
    assert len({gateway_for(7, gws, f"d{i}") for i in range(20)}) == 3


def test_an_sdk_client_fails_over_along_every_gateway_its_own_first():
    """Issue 34 item 2 (docs/decisions/0082): qim-loadgen's SDK clients get every gateway."""
    from qim.cli.gateways import failover_order

    gws = ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
    assert failover_order("127.0.0.1:2", gws) == ("127.0.0.1:2", "127.0.0.1:1", "127.0.0.1:3")
    assert failover_order("127.0.0.1:1", gws[:1]) == ("127.0.0.1:1",)
