"""Archive tier configuration (qim/config/tier.py; docs/design.md §11: invalid values stop the
process at start naming the variable). Pure logic over a dict."""

from __future__ import annotations

import pytest

from qim.config import CommonConfig, Env
from qim.config.archiver import ArchiverConfig
from qim.errors import ConfigError

BASE = {"QIM_REDIS_ADDR": "127.0.0.1:6379", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092"}
CQL = {"QIM_SCYLLA_ADDRS": "127.0.0.1:9042"}


def tier(**kw: str):
    return CommonConfig.from_env(Env({**BASE, **kw})).tier


def refused(build, **kw: str) -> str:
    with pytest.raises(ConfigError) as exc:
        build(Env({**BASE, **kw}))
    return str(exc.value)


def test_the_backend_is_tiered_exactly_when_a_cql_cluster_is_named():
    assert tier().backend == "redis" and tier().scylla is None
    t = tier(**CQL)
    assert t.backend == "tiered" and t.scylla.hosts == ("127.0.0.1",) and t.scylla.port == 9042
    assert t.scylla.keyspace == "qim" and not t.scylla.allow_single_node_dev
    assert tier(**CQL, QIM_MESSAGE_STORE_BACKEND="redis").backend == "redis"  # archive, but no trim
    assert (t.hot_window_ms, t.default_retention_days, t.recovery_window_ms, t.trim_slack_ms, t.trim_period_ms) == (
        7 * 86_400_000, 30, 7 * 86_400_000, 60_000, 5000)


@pytest.mark.parametrize("kw, needle", [
    ({"QIM_MESSAGE_STORE_BACKEND": "tiered"}, "QIM_MESSAGE_STORE_BACKEND=tiered needs QIM_SCYLLA_ADDRS"),
    ({"QIM_MESSAGE_STORE_BACKEND": "scylla", **CQL}, "QIM_MESSAGE_STORE_BACKEND='scylla' must be one of"),
    ({"QIM_SCYLLA_ADDRS": "127.0.0.1:9042,127.0.0.2:9043"}, "QIM_SCYLLA_ADDRS: every contact point must use"),
    ({"QIM_SCYLLA_ADDRS": "nohost"}, "QIM_SCYLLA_ADDRS: bad address"),
    ({"QIM_SCYLLA_KEYSPACE": "Qim-1", **CQL}, "QIM_SCYLLA_KEYSPACE='Qim-1' must match"),
    ({"QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV": "yes", **CQL}, "QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV='yes' must be 0 or 1"),
    ({"QIM_DEFAULT_HISTORY_RETENTION_DAYS": "0"}, "QIM_DEFAULT_HISTORY_RETENTION_DAYS=0 is outside 1..3650"),
    ({"QIM_DEFAULT_HISTORY_RETENTION_DAYS": "3651"}, "QIM_DEFAULT_HISTORY_RETENTION_DAYS=3651 is outside 1..3650"),
    ({"QIM_HISTORY_HOT_WINDOW_MS": "999"}, "QIM_HISTORY_HOT_WINDOW_MS=999 is outside"),
    ({"QIM_OUTBOX_RETENTION_MS": "x"}, "QIM_OUTBOX_RETENTION_MS='x' is not an integer"),
    ({"QIM_HISTORY_TRIM_PERIOD_MS": "10"}, "QIM_HISTORY_TRIM_PERIOD_MS=10 is outside"),
])
def test_a_bad_value_names_its_variable(kw, needle):
    assert needle in refused(CommonConfig.from_env, **kw)


def test_the_archiver_needs_a_cql_cluster_and_fault_points_need_injection():
    assert "QIM_SCYLLA_ADDRS is required by qim-archiver" in refused(ArchiverConfig.from_env)
    cfg = ArchiverConfig.from_env(Env({**BASE, **CQL}))
    assert cfg.metrics_listen == "127.0.0.1:9107" and cfg.batch_size == 512 and cfg.fault_point == ""
    assert "QIM_FAULT_INJECTION=1 is not" in refused(ArchiverConfig.from_env, QIM_ARCHIVER_FAULT_POINT="after_write",
                                                     **CQL)
    assert "QIM_ARCHIVER_BATCH_SIZE=0 is outside" in refused(ArchiverConfig.from_env, QIM_ARCHIVER_BATCH_SIZE="0", **CQL)
