"""ERROR frame bodies (docs/protocol.md ERROR; docs/design.md §4 "every request gets a reply
or an ERROR frame with its request_id"): the one encode/decode pair, used by the
gateway (to clients), the RPC server and client (between services) and qimctl.

`decode_error` is the one decoder of an ERROR body. `RemoteError` is what a caller
raises for an ERROR reply. It carries no opcode on purpose: whoever re-raises it to a
client builds the body with the client's own request opcode, so a client never sees
the internal opcode of the hop that failed (docs/protocol.md ERROR)."""

from __future__ import annotations

from typing import NamedTuple

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import common_pb2


def error_body(code: ErrorCode, message: str, request_opcode: int = 0, retry_after_ms: int = 0,
               until_ms: int = 0) -> bytes:
    """Serialized `qim.v1.Error` for an ERROR frame (`message` must be safe to show:
    no keys, tokens or bodies; `retry_after_ms`: the RATE_LIMITED hint, 0 = none;
    `until_ms`: a BANNED refusal's end, unix ms, 0 = none)."""
    return common_pb2.Error(code=int(code), message=message, request_opcode=request_opcode,
                            retry_after_ms=retry_after_ms, until_ms=until_ms).SerializeToString()


class RemoteError(RequestError):
    """The peer answered with an ERROR frame: `code` and `message` are the peer's,
    `retry_after_ms` its retry hint (0 = none), passed on to the client unchanged."""

    retry_after_ms: int = 0


# The mark that opens the message of a NodeUnfit refusal on an internal hop. An internal
# convention only (the Error message is the one field every hop carries): qim.v1.Error is
# a client-visible message, and a flag there would be a protocol change for a fact that
# concerns the hops between services (docs/decisions/0079-writer-failover.md).
UNFIT_MARK = "node unfit: "


class NodeUnfit(RequestError):
    """UNAVAILABLE from a node that cannot serve any request right now for a reason of its
    own (a writer whose clock stalled or whose lease lapsed), not because of the request
    or a shared engine: another node of the same service may well serve it, and a router
    with several (the gateway's rendezvous routing of writers) tries the next one at once.
    `message` starts with UNFIT_MARK; the reply's decoder gives RemoteUnfit."""

    def __init__(self, why: str) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, UNFIT_MARK + why)


class RemoteUnfit(RemoteError):
    """The peer answered with a NodeUnfit refusal (UNAVAILABLE, message with UNFIT_MARK):
    retryable on another node of its service at once."""


class ErrorBody(NamedTuple):
    """A decoded ERROR body: the code, the message (safe to show), the opcode of the
    request it answers (0 = not named) and the RATE_LIMITED retry hint (0 = none)."""

    code: ErrorCode
    message: str
    request_opcode: int = 0
    retry_after_ms: int = 0


UNREADABLE = ErrorBody(ErrorCode.INTERNAL, "unreadable ERROR body")


def decode_error(body: bytes) -> ErrorBody:
    """The ERROR body's fields; UNREADABLE (INTERNAL) when the body itself does not parse
    or names an unknown code: a peer bug must still surface as an error, never vanish."""
    err = common_pb2.Error()
    try:
        err.ParseFromString(body)
        return ErrorBody(ErrorCode(err.code), err.message, err.request_opcode, err.retry_after_ms)
    except Exception:  # noqa: BLE001 — DecodeError or an unknown ErrorCode value
        return UNREADABLE


def parse_error(body: bytes) -> RemoteError:
    """RemoteError from an ERROR body (decode_error's code and message); RemoteUnfit for
    a NodeUnfit refusal."""
    err = decode_error(body)
    if err.code == ErrorCode.UNAVAILABLE and err.message.startswith(UNFIT_MARK):
        return RemoteUnfit(err.code, err.message)
    exc = RemoteError(err.code, err.message)
    exc.retry_after_ms = err.retry_after_ms  # a held send's hint (docs/decisions/0099)
    return exc
