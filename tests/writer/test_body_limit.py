"""The writer checks a body against the configured QIM_MAX_MESSAGE_BODY, the same limit
the gateway applies, not the built-in 1 MiB: a WRITER_SEND that did not come through a
gateway (qimctl, a misconfigured gateway) is refused PAYLOAD_TOO_LARGE before anything
is reserved. Pure logic: the committer's first check, no engine."""

from __future__ import annotations

import os

import pytest

from qim._core import ids
from qim.config import Env, WriterConfig
from qim.consts import MAX_MESSAGE_BODY, MESSAGE_TYPE_TEXT
from qim.errors import ErrorCode, RequestError
from qim.faults import FaultPoints
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.writer.committer import MessageCommitter

ENV = {"QIM_REDIS_ADDR": "127.0.0.1:6379", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092", "QIM_INTERNAL_PLAINTEXT_DEV": "1"}


class Untouched:
    """Any store or producer call fails the test: the refusal comes first."""

    def __getattr__(self, name):
        raise AssertionError(f"the committer reached {name} for a body over the limit")


def send(body_len: int) -> message_pb2.SendMessage:
    return message_pb2.SendMessage(conversation_id=ids.conversation_id_direct(0, 5, 9), recipient_user_id=9,
                                   client_message_id=os.urandom(16), message_type=MESSAGE_TYPE_TEXT,
                                   body=b"x" * body_len)


def test_the_writer_reads_the_same_variable_as_the_gateway():
    assert WriterConfig.from_env(Env({**ENV, "QIM_MAX_MESSAGE_BODY": "100"})).max_body == 100
    assert WriterConfig.from_env(Env(ENV)).max_body == MAX_MESSAGE_BODY


async def test_a_body_over_the_configured_limit_is_refused_before_any_reservation():
    limit = WriterConfig.from_env(Env({**ENV, "QIM_MAX_MESSAGE_BODY": "100"})).max_body
    none = Untouched()
    committer = MessageCommitter(none, none, none, 64, FaultPoints(""), {}, max_body=limit)  # type: ignore[arg-type]
    actor = internal_pb2.Actor(tenant_id=bytes(16), user_id=5, device_id=1)
    with pytest.raises(RequestError) as exc:
        await committer.commit(actor, send(101), committer.ticket(actor.tenant_id, b"c"))
    assert exc.value.code == ErrorCode.PAYLOAD_TOO_LARGE and "100 bytes" in exc.value.message
