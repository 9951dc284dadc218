"""REPORT in the writer (docs/decisions/0124-user-reports.md): the writer owns the
conversation, so it knows whether the reporter is a member and the message is one the
reporter can see (Reactions.visible_message, the check a REACT makes). The report is
then stored in the ReportStore (qim/stores/reports.py: the Redis home instance), once per
(reporter, client_report_id); the ModerationService delivers it to the operator's
webhook. No turn, no conversation_seq: nothing is written into the conversation.
"""

from __future__ import annotations

from qim.proto.v1 import internal_pb2, moderation_pb2
from qim.services.writer.reactions import Reactions
from qim.stores.reports import ReportStore
from qim.wire.report import check_report, reason_name


class Reports:
    """The writer's REPORT handler over the membership/message check and the ReportStore."""

    def __init__(self, reactions: Reactions, store: ReportStore) -> None:
        self._reactions = reactions
        self._store = store

    async def report(
        self, actor: internal_pb2.Actor, tenant: int, req: moderation_pb2.Report
    ) -> moderation_pb2.ReportOk:
        """REPORT: INVALID_ARGUMENT / PAYLOAD_TOO_LARGE for a bad request (check_report),
        FORBIDDEN for a non-member, NOT_FOUND for a message not in the conversation,
        UNAVAILABLE when the home Redis is down; a retry returns the first report's id."""
        check_report(req)
        rec = await self._reactions.visible_message(
            tenant, actor.user_id, req.conversation_id, req.peer_user_id, req.message_id
        )
        report_id, duplicate = await self._store.add(
            tenant,
            actor.user_id,
            req.client_report_id,
            {
                "device": str(actor.device_id),
                "conversation_id": req.conversation_id.hex(),
                "message_id": req.message_id.hex(),
                "peer": str(req.peer_user_id),
                "sender": str(rec.sender_id),  # whom `qimctl moderation resolve --action ban` bans
                "reason": reason_name(req.reason),
                "text": req.text,
            },
        )
        return moderation_pb2.ReportOk(report_id=report_id, duplicate=duplicate)
