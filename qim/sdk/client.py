"""Client: the one object an app holds, over ClientRuntime and LocalStore.

    client = await Client.open(endpoint, token, data_dir=DIR)   # store at a stable path
    await client.connect()                 # AUTH, mailbox sync, resends, session list
    for conv in await client.conversations(): ...   # unread, exact flag, last message
    ack = await client.send_text(conv_id, "你好")
    await client.mark_read(conv_id)
    event = await client.events.get()     # typed events (qim/sdk/events.py)
    await client.close()

What it adds to the runtime: the conversation list kept current (session list after
every connect, SESSION_DELTA, READ_SYNC and every applied batch; qim/sdk/sessions.py,
qim/sdk/conversations.py), messages of a conversation local first with history
back-fill when the app scrolls back, sends by conversation (the direct peer is known
to the store), recall, read positions and groups. Every operation is the runtime's
(idempotent retries, local refusal of over-limit sends, reconnects): see docs/sdk.md.

Tokens expire: pass `token_provider=` (a function or coroutine function returning a
fresh token) to `Client.open`, or call `update_token()`; the runtime uses it on the next
(re)connect (qim/sdk/credentials.py, docs/sdk.md "Tokens").

Names (docs/sdk.md "Names"): `display_name` (this user's, from its token),
`display_names(user_ids)` (anyone's, cached in the store), a group's `title` in its
Conversation, `create_group(..., title=)` and `set_group_title()`.

Errors: ValueError (a token that is not a QIM token, a bad endpoint),
StoreError (the store belongs to another device), NotConnected, ConnectionLost,
ServerError (with the wire ErrorCode), SendRefused, SendTimeout, Kicked.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Iterable, Optional, Union

from qim._core import ids
from qim.consts import CONVERSATION_KIND_GROUP, MESSAGE_TYPE_CUSTOM, MESSAGE_TYPE_TEXT, U63_MAX
from qim.errors import ErrorCode, IdError
from qim.sdk import extras, identity, names, reports, requests
from qim.sdk.client_convstate import ConversationChoices
from qim.sdk.client_groups import GroupsAndRooms, Member  # noqa: F401 — Member: re-exported (qim.sdk)
from qim.sdk.convstate import ConvStates
from qim.sdk.events import ConnectionLost, Edited, NotConnected, Recalled, SendAck, SendRefused
from qim.sdk.gateways import Endpoints
from qim.sdk.media import MediaCalls
from qim.sdk.model import Conversation, PendingSend, StoredMessage
from qim.sdk.push import Push
from qim.sdk.reactions import Reactions
from qim.sdk.rooms import Rooms
from qim.sdk.runtime import ClientRuntime
from qim.sdk.sessions import Sessions
from qim.wire.tokens import token_claims, token_name

PAGE = 50  # messages per page of messages()


class Client(GroupsAndRooms, ConversationChoices, MediaCalls):
    """The app's client: one user on one device at one endpoint (module docstring).
    Create with `await Client.open(...)`; `events` is the asyncio.Queue of typed events
    (None when `event_queue=False`; `on_event` is then the only listener)."""

    def __init__(self, runtime: ClientRuntime, store_path: str) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.store_path = store_path
        self.sessions = Sessions(runtime.core)
        self.sessions.attach()
        self.convstates = ConvStates(runtime)  # pin, mute, hide, read receipts (convstate.py)
        self.convstates.attach(self.sessions)
        self.profiles = names.Profiles(runtime)
        self.rooms = Rooms(runtime)  # chatrooms, in memory only (qim/sdk/rooms.py)
        self.rooms.attach()
        self.reactions = Reactions(runtime)  # reactions and typing, in memory only (qim/sdk/reactions.py)
        self.reactions.attach()
        self.push = Push(runtime)  # device push registrations (qim/sdk/push.py, decision 0128)

    @classmethod
    async def open(cls, endpoint: Endpoints, token: str, *, data_dir: Optional[str] = None,
                   store_path: Optional[str] = None, deployment: Optional[str] = None, **runtime_kw) -> "Client":
        """Open the device's store (at `store_path`, else the stable path of `deployment`
        — else the first endpoint — under `data_dir`, else under
        identity.default_data_dir()) for the identity the token names, and a runtime for
        `endpoint` ("host:port", ws:// or wss://; or several, the next on failure:
        qim/sdk/gateways.py); does not connect.
        `runtime_kw` go to ClientRuntime (on_event, event_queue, send_timeout,
        token_provider, ca_file / ssl_context / plaintext for TLS, ...). ValueError (not a QIM token, bad endpoint), StoreError
        (another device)."""
        tenant, user, device = token_claims(token)
        path = store_path or identity.store_path(endpoint, tenant, user, data_dir, deployment)
        store = await asyncio.to_thread(identity.open_store, path, tenant, user, device)
        try:
            return cls(ClientRuntime(endpoint, token, store, **runtime_kw), path)
        except BaseException:
            store.close()
            raise

    # --- identity and lifecycle ----------------------------------------------------
    @property
    def user_id(self) -> int:
        """The authenticated user this client (and its LocalStore) belongs to."""
        return self.store.user_id

    @property
    def device_id(self) -> int:
        """This device's id (kept with the store)."""
        return self.store.device_id

    @property
    def tenant(self) -> int:
        """The tenant (0 in single-tenant deployments)."""
        return self.store.tenant

    @property
    def endpoint(self) -> str:
        """The gateway address 'host:port'."""
        return self.runtime.endpoint

    @property
    def display_name(self) -> str:
        """This user's display name: the `name` claim of the token in use ("" none)."""
        return token_name(self.runtime.tokens.token)

    async def display_names(self, user_ids: Iterable[int]) -> dict[int, str]:
        """user_id -> display name ("" when the user gave none) for each id: the store's,
        asked from the server (PULL_PROFILES) when unknown or stale and connected. Ids
        stay the keys: a name is for showing only. ServerError (a server without names)."""
        return await self.profiles.names(user_ids)

    @property
    def events(self) -> Optional[asyncio.Queue]:
        """The queue of typed events (qim.sdk.events), or None when built without one."""
        return self.runtime.events

    @property
    def state(self) -> str:
        """"connecting", "syncing", "ready", "reconnecting", "offline" or "kicked"."""
        return self.runtime.state

    @property
    def stats(self) -> dict:
        """The runtime's counters (reconnects, resends, pushes, pages, ...: ClientRuntime.stats)."""
        return self.runtime.stats

    @property
    def connected(self) -> bool:
        """True while a connection is up and its mailbox sync finished: sends go out at
        once. It turns true a step before the state `ready` (the after-sync steps, such
        as the session list, still run under `syncing`; docs/sdk.md "Connection states")."""
        return self.runtime.connected

    def update_token(self, token: str) -> None:
        """Authenticate with `token` from the next (re)connect on (e.g. before the held
        one expires, when the app has no token_provider). ValueError when it names
        another tenant, user or device."""
        self.runtime.update_token(token)

    async def connect(self) -> None:
        """Connect, authenticate, sync the mailbox, resend, pull the session list.
        Reconnects on its own afterwards. ServerError (UNAUTHENTICATED: the token was
        refused), ConnectionLost (endpoint unreachable), StoreError."""
        await self.runtime.connect()

    async def close(self) -> None:
        """Close the connection and the store (pending sends stay for the next run)."""
        await self.rooms.close()
        await self.runtime.close()
        await asyncio.to_thread(self.store.close)

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- conversation list ---------------------------------------------------------
    async def conversations(self, limit: Optional[int] = None) -> list[Conversation]:
        """The list: pinned first, newest activity first in each part, hidden ones left
        out (conversation_state; docs/sdk.md "Pin, mute, hide"), with unread (+ exact
        flag) and last message."""
        shaped = self.convstates.shape(await self.store.run(self.store.conversations, None))
        return shaped if limit is None else shaped[:limit]

    async def conversation(self, conversation_id: bytes) -> Optional[Conversation]:
        """One conversation of the list, or None when it is not listed on this device."""
        return await self.store.run(self.store.conversation, conversation_id)

    async def _listed(self, conversation_id: bytes) -> Conversation:
        """A conversation this client has just listed (open, create, leave)."""
        conv = await self.conversation(conversation_id)
        if conv is None:  # the store applied it just before: a store bug, never silent
            raise RuntimeError(f"conversation {conversation_id.hex()} missing right after it was listed")
        return conv

    async def refresh_conversations(self) -> list[Conversation]:
        """Pull the whole session list now (connect() already does). NotConnected,
        ConnectionLost, ServerError."""
        await self.sessions.pull_list()
        return await self.conversations()

    def direct_id(self, peer_user_id: int) -> bytes:
        """The direct conversation_id of this user and `peer_user_id`."""
        return ids.conversation_id_direct(self.tenant, self.user_id, peer_user_id)

    async def open_direct(self, peer_user_id: int) -> Conversation:
        """The direct conversation with `peer_user_id`, listed from now on (ValueError
        for a bad id or oneself)."""
        if not 0 < peer_user_id <= U63_MAX or peer_user_id == self.user_id:
            raise ValueError("peer_user_id must be another user's non-zero id with bit 63 clear")
        conv = self.direct_id(peer_user_id)
        await self.runtime.apply(self.store.open_conversation, conv, peer_user_id, 0)
        return await self._listed(conv)

    # --- messages ------------------------------------------------------------------
    async def messages(self, conversation_id: bytes, before_seq: int = 0, limit: int = PAGE) -> list[StoredMessage]:
        """Up to `limit` messages with conversation_seq < before_seq (0: the newest), in
        conversation_seq order: the store's first; when it has fewer, older pages of
        history (PULL_HISTORY OLDER) are stored with their states and returned too.
        Offline it returns what the store has. ServerError (FORBIDDEN) otherwise."""
        conv = bytes(conversation_id)
        page = await self.store.run(self.store.messages_before, conv, before_seq, limit)
        if len(page) >= limit or await self.store.run(self.store.oldest_reached, conv):
            return page
        peer = await self.store.run(self.store.peer_of, conv)
        anchor = page[0].conversation_seq if page else before_seq
        try:
            while len(page) < limit:
                batch = await requests.pull_history(self.runtime, conv, peer, anchor_seq=anchor, limit=limit)
                if batch.items:  # back-fill is the app's answer, not news: no MessagesAdded
                    result = await self.store.run(self.store.apply_history, conv, list(batch.items))
                    self.runtime.tell(replace(result, inserted=[]))
                if not batch.has_more or not batch.items:
                    await self.store.run(self.store.set_oldest_reached, conv)
                    break
                anchor = batch.next_anchor
                page = await self.store.run(self.store.messages_before, conv, before_seq, limit)
        except (NotConnected, ConnectionLost):
            pass  # offline: the store's part only
        return await self.store.run(self.store.messages_before, conv, before_seq, limit)

    async def unsent(self, conversation_id: Optional[bytes] = None) -> list[PendingSend]:
        """Sends not yet in the store as messages: state "pending" (not acknowledged),
        "acked" (committed, its mailbox entry not applied yet) or "failed" (refused)."""
        return await self.store.run(self.store.unsent, conversation_id)

    async def send(self, conversation_id: bytes, body: bytes, message_type: int = MESSAGE_TYPE_TEXT,
                   custom_type: bytes = b"", wait: bool = True, *, reply_to: Optional[bytes] = None,
                   mentions: Iterable[int] = (), mention_all: bool = False) -> Union[SendAck, bytes]:
        """Send to a conversation (direct: the peer the store knows; group: its members).
        Stored as pending first (SendPending); `wait` returns the SendAck, else the
        client_message_id at once. `reply_to`: the message_id replied to (the server quotes
        it); `mentions`: user ids, `mention_all`: everyone (a group above 20 members: the
        owner only). SendRefused (unknown peer, over-limit body, ...), ServerError
        (NOT_FOUND: no such message to reply to; FORBIDDEN: mention_all), SendTimeout (the
        send stays pending and is resent with the same reply target and mentions)."""
        more = extras.send_extras(reply_to, mentions, mention_all)
        conv = bytes(conversation_id)
        recipient = 0
        try:
            kind = ids.conversation_kind(conv)
        except IdError as exc:  # a bad conversation is a refused send, like every other bad input to send
            raise SendRefused(ErrorCode.INVALID_ARGUMENT, f"not a conversation_id: {exc}") from None
        if kind != CONVERSATION_KIND_GROUP:
            recipient = await self.store.run(self.store.peer_of, conv)
            if not recipient:
                raise SendRefused(ErrorCode.INVALID_ARGUMENT, "unknown peer: open_direct(peer_user_id) first")
        if wait:
            return await self.runtime.send_message(conv, recipient, body, message_type, custom_type, more)
        return await self.runtime.submit_message(conv, recipient, body, message_type, custom_type, more)

    async def send_text(self, conversation_id: bytes, text: str, wait: bool = True) -> Union[SendAck, bytes]:
        """A TEXT message of UTF-8 `text` (any script, emoji, several lines)."""
        return await self.send(conversation_id, text.encode("utf-8"), MESSAGE_TYPE_TEXT, b"", wait)

    async def send_custom(self, conversation_id: bytes, custom_type: str, body: bytes,
                          wait: bool = True) -> Union[SendAck, bytes]:
        """A CUSTOM message: `custom_type` (≤ 64 bytes UTF-8) tells the app what `body` is."""
        return await self.send(conversation_id, body, MESSAGE_TYPE_CUSTOM, custom_type.encode("utf-8"), wait)

    async def edit(self, conversation_id: bytes, message_id: bytes, body: Union[str, bytes]) -> Edited:
        """Replace the body of one of the user's own messages (within the recall window;
        docs/sdk.md "Replies, mentions and edits"): every device, this one included, is
        told MessagesUpdated with the new body and `edited` True when the edit's CONTROL
        message reaches it. ServerError (FORBIDDEN: not ours, too old, recalled;
        NOT_FOUND; POLICY_REFUSED)."""
        conv = bytes(conversation_id)
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        peer = await self.store.run(self.store.peer_of, conv)
        ok = await requests.edit(self.runtime, conv, bytes(message_id), data, peer)
        return Edited(bytes(ok.message_id), ok.version, ok.control_conversation_seq, ok.edited_at_ms,
                      replaced=ok.replaced, body=ok.body if ok.replaced else None)

    async def recall(self, conversation_id: bytes, message_id: bytes) -> Recalled:
        """Recall one of the user's own messages (24 h window on the server); the stored
        copy loses its body at once (MessagesUpdated), the other members' copies when the
        CONTROL message reaches them. ServerError (FORBIDDEN: not ours or too old,
        NOT_FOUND)."""
        conv = bytes(conversation_id)
        peer = await self.store.run(self.store.peer_of, conv)
        ok = await requests.recall(self.runtime, conv, bytes(message_id), peer)
        await self.runtime.apply(self.store.mark_state, bytes(message_id), int(ok.state))
        return Recalled(bytes(ok.message_id), int(ok.state), ok.control_conversation_seq)

    async def report(self, conversation_id: bytes, message_id: bytes, reason: str, text: str = "",
                     client_report_id: Optional[bytes] = None) -> reports.Reported:
        """Report a message of a conversation the user is a member of to the operator
        (reason: spam, abuse, illegal, other; text at most 1,000 bytes). Pass the returned
        client_report_id again to retry: it is stored once. ValueError (bad input),
        ServerError (FORBIDDEN, NOT_FOUND); qim/sdk/reports.py."""
        conv = bytes(conversation_id)
        peer = int(await self.store.run(self.store.peer_of, conv) or 0)
        return await reports.report(self.runtime, conv, message_id, peer, reason, text, client_report_id)

    @property
    def badge(self) -> tuple[int, int]:
        """(badge, version): the user's total unread as the server's UserBadgeState holds it
        (docs/decisions/0129; muted chats count only a mention, left groups nothing), from
        the list pull and SESSION_DELTA, the highest version kept; (0, 0) before any."""
        return self.sessions.badge

    async def mark_read(self, conversation_id: bytes, seq: Optional[int] = None) -> int:
        """Move the read position (default: to the newest message); returns it. Other
        devices get READ_SYNC. ServerError (FORBIDDEN, NOT_FOUND)."""
        return await self.sessions.mark_read(conversation_id, seq)
