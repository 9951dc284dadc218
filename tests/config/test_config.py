"""Configuration from QIM_* variables (qim/config/; docs/design.md §11 "invalid values stop
the process at start with a message naming the variable"). Pure logic over a dict."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from qim.config import Env, FanoutConfig, GatewayConfig, MailboxConfig, SessionConfig, WriterConfig
from qim.consts import FANOUT_BATCH_DEFAULT, SHARD_LEASE_MS_DEFAULT
from qim.errors import ConfigError
from qim.topology import SERVICES
from qim.wire.tokens import SigningKey

_KEYS = tempfile.TemporaryDirectory()  # the gateway's token public keys; removed at exit
KEY, OTHER = SigningKey.generate(), SigningKey.generate("ES256")
PUB, PUB2, PRIVATE = (str(Path(_KEYS.name) / n) for n in ("pub.pem", "pub2.pem", "private.pem"))
Path(PUB).write_bytes(KEY.verify_key().public_pem())
Path(PUB2).write_bytes(OTHER.verify_key().public_pem())
Path(PRIVATE).write_bytes(KEY.private_pem())
BASE = {"QIM_REDIS_ADDR": "127.0.0.1:6379", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092", "QIM_TOKEN_PUBLIC_KEYS": PUB,
        # loopback defaults: plaintext is allowed with the development flags (TLS: tests/config/test_tls_config.py)
        "QIM_GATEWAY_PLAINTEXT_DEV": "1", "QIM_INTERNAL_PLAINTEXT_DEV": "1"}


def env(**kw: str) -> Env:
    return Env({**BASE, **kw})


def refused(build, **kw: str) -> str:
    with pytest.raises(ConfigError) as exc:
        build(env(**kw))
    return str(exc.value)


def test_defaults_are_the_design_defaults():
    gw = GatewayConfig.from_env(env())
    assert gw.listen == "127.0.0.1:7100" and gw.metrics_listen == f"127.0.0.1:{SERVICES['gateway'].metrics_port}"
    assert gw.common.shard_count == 64 and gw.common.tenant == 0 and not gw.common.allow_unsafe_dev
    assert FanoutConfig.from_env(env()).batch_size == FANOUT_BATCH_DEFAULT
    # shards are leased from the ShardRegistry (docs/decisions/0040): a node id, a lease
    mb = MailboxConfig.from_env(env(QIM_MAILBOX_SHARD_COUNT="16"))
    assert mb.registry is not None and mb.registry.node_id == "mailbox@127.0.0.1:7102"
    assert (mb.registry.lease_ms, mb.registry.renew_ms) == (SHARD_LEASE_MS_DEFAULT, SHARD_LEASE_MS_DEFAULT // 4)
    assert mb.registry.redis_addr == mb.common.redis_addr
    session = SessionConfig.from_env(env(QIM_NODE_ID="session-7", QIM_REGISTRY_REDIS_ADDR="127.0.0.1:6390"))
    assert session.registry is not None and (session.registry.node_id, session.registry.redis_addr) == (
        "session-7", "127.0.0.1:6390")


@pytest.mark.parametrize("name, value, needle", [
    ("QIM_MAILBOX_SHARD_COUNT", "48", "QIM_MAILBOX_SHARD_COUNT=48 is not a power of two"),
    ("QIM_MAILBOX_SHARD_COUNT", "0", "QIM_MAILBOX_SHARD_COUNT=0 is outside 1..65536"),
    ("QIM_WRITER_REQUEST_INFLIGHT_LIMIT", "lots", "QIM_WRITER_REQUEST_INFLIGHT_LIMIT='lots' is not an integer"),
    ("QIM_WRITER_REQUEST_INFLIGHT_LIMIT", "9000", "QIM_WRITER_REQUEST_INFLIGHT_LIMIT=9000 is outside 1..8192"),
    ("QIM_WRITER_LISTEN", "7101", "QIM_WRITER_LISTEN: bad address '7101'"),
    ("QIM_REDIS_ALLOW_UNSAFE_DEV", "yes", "QIM_REDIS_ALLOW_UNSAFE_DEV='yes' must be 0 or 1"),
    ("QIM_TENANT_ID", "-1", "QIM_TENANT_ID must be a u128"),
    ("QIM_TENANT_ID", "abc", "QIM_TENANT_ID='abc' is not an integer"),
    ("QIM_REDIS_ADDR", "", "QIM_REDIS_ADDR is required"),
])
def test_a_bad_value_names_its_variable(name, value, needle):
    assert needle in refused(WriterConfig.from_env, **{name: value})


def test_overtakes_are_on_unless_turned_off():
    """docs/decisions/0165: on by default (Redis store only, qim/services/mailbox/node.py)."""
    assert MailboxConfig.from_env(env()).overtake is True
    assert MailboxConfig.from_env(env(QIM_MAILBOX_OVERTAKE="")).overtake is True
    assert MailboxConfig.from_env(env(QIM_MAILBOX_OVERTAKE="0")).overtake is False
    assert MailboxConfig.from_env(env(QIM_MAILBOX_OVERTAKE="1")).overtake is True
    assert "QIM_MAILBOX_OVERTAKE='on' must be 0 or 1" in refused(MailboxConfig.from_env, QIM_MAILBOX_OVERTAKE="on")


def test_lists_addresses_and_indexes_are_checked_per_service():
    assert "QIM_WRITER_ADDRS lists no address" in refused(GatewayConfig.from_env, QIM_WRITER_ADDRS=" , ")
    assert "QIM_MAILBOX_ADDRS: bad address 'nope'" in refused(GatewayConfig.from_env,
                                                               QIM_MAILBOX_ADDRS="127.0.0.1:1,nope")
    assert "QIM_NODE_ID='a b'" in refused(MailboxConfig.from_env, QIM_NODE_ID="a b")
    assert "QIM_SHARD_RENEW_MS=3000 must be at most half" in refused(SessionConfig.from_env, QIM_SHARD_LEASE_MS="4000",
                                                                      QIM_SHARD_RENEW_MS="3000")
    assert "QIM_TOKEN_PUBLIC_KEYS is required" in refused(GatewayConfig.from_env, QIM_TOKEN_PUBLIC_KEYS="")
    assert "QIM_FANOUT_BATCH_SIZE=0 is outside" in refused(FanoutConfig.from_env, QIM_FANOUT_BATCH_SIZE="0")


def test_fault_points_need_the_switch_and_loopback_listeners():
    assert "QIM_FAULT_INJECTION=1 is not" in refused(WriterConfig.from_env, QIM_WRITER_FAULT_POINT="after_record")
    msg = refused(WriterConfig.from_env, QIM_WRITER_FAULT_POINT="after_record", QIM_FAULT_INJECTION="1",
                  QIM_WRITER_LISTEN="10.0.0.1:7101")
    assert "requires loopback listeners; QIM_WRITER_LISTEN is 10.0.0.1" in msg
    msg = refused(WriterConfig.from_env, QIM_WRITER_FAULT_POINT="nowhere", QIM_FAULT_INJECTION="1")
    assert "QIM_WRITER_FAULT_POINT='nowhere' is not one of" in msg
    ok = WriterConfig.from_env(env(QIM_WRITER_FAULT_POINT="after_record", QIM_FAULT_INJECTION="1"))
    assert ok.fault_point == "after_record"


def test_hex_values_and_the_clock_skew_guard():
    assert WriterConfig.from_env(env(QIM_TENANT_ID="0x10")).common.tenant == 16
    assert WriterConfig.from_env(env(QIM_CLOCK_SKEW_MS="-5000")).clock_skew_ms == -5000
    assert "QIM_CLOCK_SKEW_MS requires loopback" in refused(WriterConfig.from_env, QIM_CLOCK_SKEW_MS="1",
                                                            QIM_WRITER_METRICS_LISTEN="0.0.0.0:9101")


def test_token_keys_two_for_a_rotation_and_each_bad_file_named():
    gw = GatewayConfig.from_env(env(QIM_TOKEN_PUBLIC_KEYS=f"{PUB}, {PUB2}"))
    assert [(k.kid, k.alg) for k in gw.token_keys] == [(KEY.kid, "EdDSA"), (OTHER.kid, "ES256")]
    assert (gw.token_audience, gw.token_issuer, gw.token_leeway_s) == ("qim", "qim-dev", 5)
    missing = str(Path(_KEYS.name) / "missing.pem")
    assert f"QIM_TOKEN_PUBLIC_KEYS: cannot read {missing}" in refused(GatewayConfig.from_env,
                                                                      QIM_TOKEN_PUBLIC_KEYS=missing)
    assert "private key" in refused(GatewayConfig.from_env, QIM_TOKEN_PUBLIC_KEYS=PRIVATE)
    assert "same key" in refused(GatewayConfig.from_env, QIM_TOKEN_PUBLIC_KEYS=f"{PUB},{PUB}")
    assert "QIM_TOKEN_LEEWAY_S=301 is outside 0..300" in refused(GatewayConfig.from_env, QIM_TOKEN_LEEWAY_S="301")


def test_rate_limits_and_connection_cap():
    gw = GatewayConfig.from_env(env(QIM_RATE_USER_PER_S="3", QIM_RATE_USER_BURST="4", QIM_RATE_CONN_PER_S="0",
                                    QIM_MAX_CONNECTIONS_PER_USER="2"))
    assert (gw.rate_user_per_s, gw.rate_user_burst, gw.rate_conn_per_s, gw.max_connections_per_user) == (3, 4, 0, 2)
    assert "QIM_RATE_CONN_BURST=0 is outside" in refused(GatewayConfig.from_env, QIM_RATE_CONN_BURST="0")
    assert "QIM_MAX_CONNECTIONS_PER_USER=0 is outside" in refused(GatewayConfig.from_env,
                                                                  QIM_MAX_CONNECTIONS_PER_USER="0")
