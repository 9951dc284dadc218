"""Client.report: a member reports a message to the deployment's operator (REPORT,
docs/decisions/0124-user-reports.md; docs/sdk.md "Reports")."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from qim.errors import RequestError
from qim.proto.v1 import moderation_pb2
from qim.protocol import Opcode
from qim.wire.report import check_report

REASONS = {"spam": 1, "abuse": 2, "illegal": 3, "other": 4}  # moderation_pb2.ReportReason


@dataclass(frozen=True)
class Reported:
    """The server's answer: `report_id` (the operator's handle), `duplicate` (this
    client_report_id was stored before: the first report's id), `client_report_id`
    (the 16 bytes to repeat the same report with)."""

    report_id: str
    duplicate: bool
    client_report_id: bytes


async def report(
    runtime,
    conversation_id: bytes,
    message_id: bytes,
    peer: int,
    reason: str,
    text: str,
    client_report_id: Optional[bytes],
) -> Reported:
    """Send one REPORT and wait for REPORT_OK. ValueError for an unknown reason, bad ids or
    text over 1,000 bytes (nothing sent); ServerError (FORBIDDEN: not a member,
    NOT_FOUND: no such message) from the server. A retry with the same
    `client_report_id` (the one returned) is stored once."""
    if reason not in REASONS:
        raise ValueError(f"reason: one of {', '.join(REASONS)}")
    crid = bytes(client_report_id) if client_report_id is not None else os.urandom(16)
    req = moderation_pb2.Report(
        conversation_id=bytes(conversation_id),
        message_id=bytes(message_id),
        reason=REASONS[reason],
        text=text,
        client_report_id=crid,
        peer_user_id=peer,
    )
    try:
        check_report(req)
    except RequestError as exc:
        raise ValueError(exc.message) from None
    _, body = await runtime.request(Opcode.REPORT, req.SerializeToString())
    ok = moderation_pb2.ReportOk.FromString(body)
    return Reported(ok.report_id, ok.duplicate, crid)
