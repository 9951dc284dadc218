"""The pure checks of a REPORT (docs/decisions/0124-user-reports.md), shared by the
gateway, the writer and the SDK's own validation."""

from __future__ import annotations

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import moderation_pb2
from qim.wire.validate import check_conversation, check_id

REPORT_TEXT_MAX = 1000  # bytes of UTF-8


def check_report(req: moderation_pb2.Report) -> None:
    """RequestError(INVALID_ARGUMENT) for a bad conversation, message or client_report_id
    or an unknown reason; PAYLOAD_TOO_LARGE for text over REPORT_TEXT_MAX bytes."""
    check_conversation(req.conversation_id)
    check_id(req.message_id, "message_id")
    check_id(req.client_report_id, "client_report_id")
    if req.reason not in moderation_pb2.ReportReason.values() or req.reason == 0:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "reason: one of spam, abuse, illegal, other")
    if len(req.text.encode("utf-8")) > REPORT_TEXT_MAX:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"text exceeds {REPORT_TEXT_MAX} bytes")


def reason_name(reason: int) -> str:
    """`spam`, `abuse`, ... for a ReportReason value."""
    return moderation_pb2.ReportReason.Name(reason).removeprefix("REPORT_REASON_").lower()
