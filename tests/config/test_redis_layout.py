"""Which Redis instance holds what (qim/config/redislayout.py, docs/decisions/0096):
the variables, their refusals and the placement rules. Pure logic."""

from __future__ import annotations

import pytest

from qim._core import ids
from qim.config import WriterConfig
from qim.config.redislayout import RedisLayout
from qim.consts import COMMIT_BUCKET_COUNT
from qim.errors import ConfigError
from tests.config.test_config import env, refused

A, B, C = "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"


def test_unset_every_role_is_the_one_redis():
    layout = WriterConfig.from_env(env(QIM_REDIS_ADDR=A)).common.redis_layout
    assert layout.core == (A,) and layout.mailbox == (A,) and layout.addrs == (A,)


def test_the_lists_name_the_instances_per_role():
    common = WriterConfig.from_env(env(QIM_REDIS_ADDR=A, QIM_REDIS_CORE_ADDRS=f"{A},{B}",
                                       QIM_REDIS_MAILBOX_ADDRS=f"{C}, {A}", QIM_MAILBOX_SHARD_COUNT="16")).common
    layout = common.redis_layout
    assert layout.core == (A, B) and layout.mailbox == (C, A) and layout.addrs == (A, B, C)
    assert layout.shard_count == 16 and layout.home == A


@pytest.mark.parametrize("kw, needle", [
    ({"QIM_REDIS_CORE_ADDRS": f"{B},{A}"}, "QIM_REDIS_ADDR must be the first of QIM_REDIS_CORE_ADDRS"),
    ({"QIM_REDIS_CORE_ADDRS": f"{A},nonsense"}, "QIM_REDIS_CORE_ADDRS"),
    ({"QIM_REDIS_MAILBOX_ADDRS": " , "}, "QIM_REDIS_MAILBOX_ADDRS lists no address"),
])
def test_bad_lists_are_refused_naming_the_variable(kw, needle):
    assert needle in refused(WriterConfig.from_env, QIM_REDIS_ADDR=A, **kw)


def test_commit_buckets_fill_contiguous_ranges_of_the_core_instances():
    layout = RedisLayout((A, B, C), (A,))
    owners = [layout.core_index(b) for b in range(COMMIT_BUCKET_COUNT)]
    assert owners == sorted(owners) and set(owners) == {0, 1, 2}
    assert max(owners.count(i) for i in range(3)) - min(owners.count(i) for i in range(3)) <= 1
    with pytest.raises(ValueError):
        layout.core_index(COMMIT_BUCKET_COUNT)


def test_a_user_lives_on_the_instance_of_its_mailbox_shard():
    layout = RedisLayout((A,), (A, B, C), shard_count=8)
    for user in range(1000, 1100):
        shard = ids.user_placement(0, user, 8)[2]
        assert layout.user_shard(0, user) == shard
        assert layout.mailbox_index(shard) == shard % 3


@pytest.mark.parametrize("core, mailbox, shards", [((), (A,), 1), ((A,), (), 1), ((A,), (A,), 3), ((A,), (A,), 0)])
def test_a_layout_without_instances_or_with_a_bad_shard_count_is_refused(core, mailbox, shards):
    with pytest.raises(ValueError):
        RedisLayout(core, mailbox, shards)


def test_config_error_is_the_type():
    with pytest.raises(ConfigError):
        WriterConfig.from_env(env(QIM_REDIS_ADDR=A, QIM_REDIS_CORE_ADDRS=B))
