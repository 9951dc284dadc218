"""The unit tests' stand-in gateway is a whole GatewayContext (decision 0116): a part
added to the context and not to the stand-in would be read as an attribute error
deep inside a connection, not here."""

import dataclasses

from qim.services.gateway.context import GatewayContext
from tests.gateway.standin import StandinGateway, gateway


def test_the_standin_has_every_part_of_the_gateway_context_and_no_other():
    parts = {name for name, member in vars(GatewayContext).items() if isinstance(member, property)}
    assert "presence" in parts and "limiter" in parts  # the walk found the Protocol's members
    assert {f.name for f in dataclasses.fields(StandinGateway)} == parts


def test_a_standin_runs_without_the_optional_parts():
    gw = gateway()
    assert (gw.logins, gw.revocations, gw.epochs, gw.presence, gw.locals) == (None, None, None, None, {})
