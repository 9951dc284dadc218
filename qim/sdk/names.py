"""Names a person can read (docs/sdk.md "Names"; docs/protocol.md "Names"): group
titles and users' display names. Numeric ids stay the keys; a name is only shown.

- A group's title is set at creation (CREATE_GROUP.title) and changed by its owner
  (SET_GROUP_TITLE); both are CONTROL messages, so every member's list learns it through
  its mailbox (qim/sdk/titles.py), and the session list carries the current one.
- A user's display name is the `name` claim of its token. The gateway hands it to the
  session service with the user's session list pull, which keeps the newest one per
  user; anybody asks for names by user id (PULL_PROFILES). `Profiles` keeps the answers
  in the LocalStore (`profiles` table), so names show offline and after a restart, and
  asks again for a name older than PROFILE_TTL_S (names change rarely; a stale one is
  only a display matter). An empty answer is asked again after EMPTY_RETRY_S: the
  server learns a name at the user's first login, so a peer asked about before it
  ever logged in would otherwise stay nameless for the whole TTL.

Errors: NotConnected / ConnectionLost / ServerError from the requests (`display_names`
returns what the store holds when offline, never raises for that).
"""

from __future__ import annotations

import functools
import struct
import time
from typing import Iterable

from qim.consts import PROFILES_PAGE_MAX
from qim.proto.v1 import group_pb2, session_pb2
from qim.protocol import Opcode
from qim.sdk.events import ConnectionLost, NotConnected
from qim.sdk.requests import _operation
from qim.sdk.retry import Backoff, with_retry
from qim.sdk.runtime import ClientRuntime

PROFILE_TTL_S = 3600.0
EMPTY_RETRY_S = 10.0  # a user without a name (yet): asked again at most this often


async def set_group_title(rt: ClientRuntime, group_id: int, title: str) -> group_pb2.GroupOk:
    """SET_GROUP_TITLE (idempotent on retry like the other group operations);
    ServerError FORBIDDEN unless the user owns the group, INVALID_ARGUMENT /
    PAYLOAD_TOO_LARGE for a bad title."""
    key = struct.pack(">Q", group_id) + title.encode("utf-8")
    return await _operation(rt, "group_title", key, False, Opcode.SET_GROUP_TITLE,
                            lambda cmid: group_pb2.SetGroupTitle(group_id=group_id, title=title,
                                                                 client_message_id=cmid).SerializeToString(),
                            group_pb2.GroupOk)


async def pull_profiles(rt: ClientRuntime, user_ids: list[int]) -> dict[int, str]:
    """PULL_PROFILES in pages of PROFILES_PAGE_MAX ids: user_id -> display name ("" none)."""
    out: dict[int, str] = {}
    for i in range(0, len(user_ids), PROFILES_PAGE_MAX):
        req = session_pb2.PullProfiles(user_ids=user_ids[i:i + PROFILES_PAGE_MAX]).SerializeToString()
        _, body = await with_retry(functools.partial(rt.request, Opcode.PULL_PROFILES, req),
                                   Backoff(budget=rt.retry_budget_s))
        out.update((p.user_id, p.display_name) for p in session_pb2.ProfilesBatch.FromString(body).profiles)
    return out


class Profiles:
    """Display names of users for one client: the LocalStore's, refreshed from the
    server when unknown or older than PROFILE_TTL_S."""

    def __init__(self, rt: ClientRuntime) -> None:
        self._rt = rt
        self._fetched: dict[int, float] = {}  # user_id -> monotonic time asked (this process)

    async def names(self, user_ids: Iterable[int]) -> dict[int, str]:
        """user_id -> display name ("" when the user gave none) for every id asked, the
        store's first; unknown or stale ones from the server when connected. Offline
        (NotConnected, ConnectionLost) the store's names only."""
        wanted = [u for u in dict.fromkeys(user_ids) if u]
        store = self._rt.store
        known = await store.run(store.profiles, wanted)
        now = time.monotonic()
        ask = [u for u in wanted
               if now - self._fetched.get(u, -PROFILE_TTL_S) >= (PROFILE_TTL_S if known.get(u) else EMPTY_RETRY_S)]
        if ask and self._rt.connected:
            try:
                found = await pull_profiles(self._rt, ask)
            except (NotConnected, ConnectionLost):
                return {u: known.get(u, "") for u in wanted}
            self._fetched.update((u, now) for u in ask)  # answered, with a name or without
            if found:
                await store.run(store.store_profiles, found.items(), int(time.time() * 1000))
                known.update(found)
        return {u: known.get(u, "") for u in wanted}
