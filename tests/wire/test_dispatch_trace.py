"""The dispatch record's version 2 (qim/wire/dispatch.py): version 1 followed by the
message's 16-byte trace id. Both versions decode (readers are upgraded first: docs/
operations.md "Rolling upgrade"); a traced record round-trips its trace id; a truncated
trace id or a wrong length is refused. Pure codec tests."""

from __future__ import annotations

import os

import pytest

from qim._core.types import MessageCoord
from qim.wire.dispatch import VERSION, VERSION_TRACED, Dispatch, DispatchDecodeError, decode


def _dispatch(trace: bytes = b"", body: bytes | None = b"hi") -> Dispatch:
    coord = MessageCoord(b"m" * 16, b"c" * 16, 7, 11, 1_700_000_000_000, 1, b"")
    return Dispatch(0, b"d" * 16, coord, 3, b"k" * 16, (11, 12), body, trace_id=trace)


@pytest.mark.parametrize("body", [b"hi", None])
def test_version_1_and_2_decode_and_keep_the_trace(body):
    plain, traced = _dispatch(body=body).encode(), _dispatch(os.urandom(16), body).encode()
    assert plain[0] == VERSION and traced[0] == VERSION_TRACED and len(traced) == len(plain) + 16
    assert decode(plain).trace_id == b"" and decode(plain) == _dispatch(body=body)
    back = decode(traced)
    assert back.trace_id == traced[-16:] and back.coord == _dispatch().coord and back.body == body


def test_a_truncated_trace_or_a_wrong_length_is_refused():
    traced = _dispatch(os.urandom(16)).encode()
    with pytest.raises(DispatchDecodeError):
        decode(traced[:-3])
    with pytest.raises(ValueError):
        _dispatch(b"short").encode()
