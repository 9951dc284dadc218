"""Every fuzz finding of issue 15 as a named regression test (each failed before its fix).

Inputs that reproduce them through the targets are saved as
tests/fuzz/corpus/<target>/finding-N-* (the seeded CI driver replays every saved input
first); these tests state each fault directly.
"""

from __future__ import annotations

import tracemalloc

import pytest
import zstandard

from qim.consts import MAX_FRAME_BODY
from qim.errors import DecompressError, ErrorCode, FrameTooLarge, RequestError
from qim.proto.v1 import group_pb2, internal_pb2, mailbox_pb2
from qim.protocol import Opcode
from tests.fuzz.stubs import run
from tests.fuzz.target_backends import handle
from tests.fuzz.target_zstd import SLACK_BYTES, impls
from tests.fuzz.zstd_gen import rle_frame

IMPLS = dict(impls())


def _peak(fn) -> tuple[object, int]:
    """(result or exception class, tracemalloc peak of the call)."""
    tracemalloc.start()
    try:
        try:
            out: object = fn()
        except (FrameTooLarge, DecompressError) as exc:
            out = type(exc)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_a_frame_that_lies_about_its_content_size_cannot_expand_past_the_limit(impl):
    """Finding 1 (target zstd): 4 KiB of RLE blocks declaring 4 MiB of content but
    expanding to 128 MiB made decompress_bounded allocate all 128 MiB before libzstd
    noticed the lie (the declared size was trusted as the bound). 16 such KiB in one
    64 KiB chunk would have been 2 GiB in the gateway."""
    bomb = rle_frame(blocks=1024, block_size=128 * 1024, byte=7, window_log=17, fcs=MAX_FRAME_BODY)
    assert len(bomb) < 5000 and zstandard.frame_content_size(bomb) == MAX_FRAME_BODY
    out, peak = _peak(lambda: IMPLS[impl].decompress_bounded(bomb, MAX_FRAME_BODY))
    assert out is DecompressError
    assert peak <= MAX_FRAME_BODY + SLACK_BYTES, f"{peak} bytes allocated"


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_a_frame_declaring_no_content_cannot_expand_either(impl):
    """The smallest lie (a declared size of 0), which now takes the capped-reader path.
    A guard, not a regression test: libzstd refused this one early before the fix too."""
    bomb = rle_frame(blocks=64, block_size=128 * 1024, byte=1, window_log=17, fcs=0)
    out, peak = _peak(lambda: IMPLS[impl].decompress_bounded(bomb, MAX_FRAME_BODY))
    assert out is DecompressError
    assert peak <= MAX_FRAME_BODY + SLACK_BYTES, f"{peak} bytes allocated"


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_a_streamed_frame_at_the_limit_is_decoded_without_a_second_copy(impl):
    """Finding 2 (target zstd): a 4 MiB body compressed without a content size (a
    streaming sender) was read twice, the bounded probe kept alive while the second
    pass decoded it again: 8 MiB allocated for a 4 MiB frame."""
    cobj = zstandard.ZstdCompressor(level=1).compressobj()
    payload = cobj.compress(b"q" * MAX_FRAME_BODY) + cobj.flush()
    assert zstandard.frame_content_size(payload) == -1
    out, peak = _peak(lambda: IMPLS[impl].decompress_bounded(payload, MAX_FRAME_BODY))
    assert out == b"q" * MAX_FRAME_BODY
    assert peak <= MAX_FRAME_BODY + SLACK_BYTES, f"{peak} bytes allocated"


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_the_lying_frame_inside_a_stream_closes_it(impl):
    """The gateway's path: the bomb as a COMPRESSED chunk through FrameDecoder."""
    bomb = rle_frame(blocks=1024, block_size=128 * 1024, byte=7, window_log=17, fcs=MAX_FRAME_BODY)
    wire = IMPLS[impl].encode_header(1, 0x0201, 0, 5, len(bomb)) + bomb
    out, peak = _peak(lambda: IMPLS[impl].FrameDecoder().feed(wire))
    assert out is DecompressError
    assert peak <= MAX_FRAME_BODY + SLACK_BYTES, f"{peak} bytes allocated"


def _backend_error(service: str, opcode: int, body: bytes) -> RequestError:
    """The RequestError a backend's real handler raises for `body` (stand-in storage)."""
    with pytest.raises(RequestError) as info:
        run(handle(service, opcode, body))
    return info.value


def test_mailbox_pull_without_an_actor_is_unauthenticated_not_internal():
    """Finding 3 (target backends): a MailboxPull whose actor has user 0 (or a tenant of
    another length) made ids.user_placement raise IdError: ERROR(INTERNAL) and a logged
    traceback instead of a refusal (the writer and the session service check the actor)."""
    upstream = mailbox_pb2.PullMailbox(cursor=0).SerializeToString()
    for actor in (internal_pb2.Actor(tenant_id=bytes(16), user_id=0, device_id=1),
                  internal_pb2.Actor(tenant_id=bytes(17), user_id=7, device_id=1),
                  internal_pb2.Actor()):
        body = internal_pb2.MailboxPull(actor=actor, upstream=upstream).SerializeToString()
        assert _backend_error("mailbox", Opcode.MAILBOX_PULL, body).code == ErrorCode.UNAUTHENTICATED


def test_writer_pull_members_of_group_zero_is_invalid_argument_not_internal():
    """Finding 4 (target backends): PULL_MEMBERS reached the writer's group read with
    group_id 0 unchecked (the gateway checks it, the writer did not): IdError, so
    ERROR(INTERNAL). Every other group opcode already checked it in the writer."""
    actor = internal_pb2.Actor(tenant_id=bytes(16), user_id=7, device_id=1)
    for group_id in (0, 1 << 63):
        upstream = group_pb2.PullMembers(group_id=group_id).SerializeToString()
        body = internal_pb2.WriterSend(actor=actor, upstream=upstream, opcode=Opcode.PULL_MEMBERS).SerializeToString()
        assert _backend_error("writer", Opcode.WRITER_SEND, body).code == ErrorCode.INVALID_ARGUMENT
