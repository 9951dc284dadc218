"""Sending through a ClientRuntime (qim/sdk/runtime.py): what the app calls to send.

`submit_message` validates (qim/sdk/validate.py: what the server would refuse raises
SendRefused before anything is stored), stores the local_pending row (reserving the
cmid), tells SendPending and starts the transmission (qim/sdk/sender.py) when the
runtime is ready; `send_message` also awaits the outcome as a `SendAck`.
"""

from __future__ import annotations

from typing import Optional

from qim.consts import MESSAGE_TYPE_TEXT
from qim.sdk import events as ev
from qim.sdk.core import RuntimeCore
from qim.sdk.events import NotConnected, SendAck
from qim.sdk.sender import Sender
from qim.sdk.store import LocalStore
from qim.sdk.validate import check_send


class Submitting:
    """The send calls of ClientRuntime, which provides core, store, max_body_bytes,
    send_timeout and its Sender."""

    core: RuntimeCore
    store: LocalStore
    max_body_bytes: int
    _sender: Sender

    @property
    def send_timeout(self) -> float:
        """Seconds a send waits for its outcome by default."""
        return self.core.tuning.send_timeout

    async def submit_message(self, conversation_id: bytes, recipient_user_id: int, body: bytes,
                             message_type: int = MESSAGE_TYPE_TEXT, custom_type: bytes = b"",
                             send_extras: bytes = b"", cmid: bytes = b"") -> bytes:
        """Validate, store the local_pending row (durable) and start sending; returns the
        cmid. SendRefused (nothing stored) for what the server would refuse. Sent now
        when ready, otherwise after the next (re)connect's reconciliation. `cmid`: one
        reserved earlier (a media send: qim/sdk/media_outbox.py)."""
        core = self.core
        check_send(self.store.tenant, self.store.user_id, conversation_id, recipient_user_id, body, message_type,
                   custom_type, self.max_body_bytes)
        row = await self.store.run(self.store.add_pending, conversation_id, recipient_user_id,
                                   message_type, custom_type, body, None, send_extras, cmid)
        core.ledger.waiter(row.client_message_id)
        core.emit(ev.SendPending(row))
        core.ledger.track(row)
        if core.ready and core.conn is not None:
            self._sender.start(core.conn, row)
        return row.client_message_id

    async def wait_ack(self, cmid: bytes, timeout: Optional[float] = None) -> SendAck:
        """Await the outcome of a submitted send. SendTimeout (row stays pending),
        ServerError (permanent ERROR), Kicked."""
        return await self.core.ledger.wait(cmid, timeout or self.send_timeout)

    async def send_message(self, conversation_id: bytes, recipient_user_id: int, body: bytes,
                           message_type: int = MESSAGE_TYPE_TEXT, custom_type: bytes = b"",
                           send_extras: bytes = b"") -> SendAck:
        """submit_message + wait_ack. Needs a prior connect() (NotConnected otherwise,
        raised before anything is stored); SendRefused, ServerError, SendTimeout.
        `send_extras`: reply target and mentions (qim/sdk/extras.py send_extras)."""
        if self.core.closing:
            raise NotConnected("call connect() first")
        cmid = await self.submit_message(conversation_id, recipient_user_id, body, message_type, custom_type,
                                         send_extras)
        return await self.wait_ack(cmid)
