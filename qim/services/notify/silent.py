"""Silent badge updates (docs/decisions/0135): when a user's badge falls (a read on
another device, a recall, a leave, an operator delete, a mute; decision 0129) the badge
settle script records the user in the instance's fell HASH in the same script as the
new badge; every NotificationService node reads those entries round after round, sends
each offline device of the user a silent update with the badge as it stands now (APNs
background push, FCM data message, Web Push a payload the service worker handles
without showing anything) and drops the entry if no newer fall came meanwhile.

Two nodes reading the same entry send once per device: `badge_versions(silent=True)`
records the highest version per device before the send and answers "skip" for a
version not newer than one already sent (so a late push never carries an older badge).
A node dying between the record and the send loses that one update: the device's badge
is corrected by its next alert, silent update or connection (SESSION_DELTA).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from qim.errors import EngineError
from qim.notify.providers.base import Alert, Notification
from qim.services.notify.due import PROVIDER_NAMES, provider_registration
from qim.services.notify.metrics import NotifyMetrics
from qim.services.notify.sender import Delivery, Sender
from qim.stores.badges import BadgeStore
from qim.stores.notify import Fell, NotifyStore
from qim.stores.push import PushRegistrationStore

logger = logging.getLogger(__name__)

PAGE = 200
IDLE_S = 0.3
ERROR_PAUSE_S = 1.0


class SilentUpdates:
    """`run()` round after round until cancelled. `online(tenant, user, device)`,
    `presence_ready(tenant, user)` as the LogConsumer's."""

    def __init__(self, notify: NotifyStore, badges: BadgeStore, push: PushRegistrationStore, sender: Sender,
                 metrics: NotifyMetrics, online: Callable[[int, int, int], bool],
                 presence_ready: Callable[[int, int], bool]) -> None:
        self._notify, self._badges, self._push, self._sender, self._m = notify, badges, push, sender, metrics
        self._online, self._ready = online, presence_ready

    async def run(self) -> None:
        """Rounds; an outage is retried after a pause."""
        while True:
            try:
                done = 0
                for client in self._notify.clients():
                    done += await self.round(client)
            except EngineError as exc:
                logger.warning("silent badge updates: %s", exc)
                await asyncio.sleep(ERROR_PAUSE_S)
                continue
            if not done:
                await asyncio.sleep(IDLE_S)

    async def round(self, client: object) -> int:
        """One page of one instance's fell entries handled; how many."""
        fell = [f for f in await self._notify.fell(client, PAGE) if self._ready(f.tenant, f.user)]
        if not fell:
            return 0
        for tenant in dict.fromkeys(f.tenant for f in fell):
            await self._tenant(tenant, [f for f in fell if f.tenant == tenant])
        await self._notify.fell_done(client, fell)
        return len(fell)

    async def _tenant(self, tenant: int, fell: list[Fell]) -> None:
        users = list(dict.fromkeys(f.user for f in fell))
        badges = await self._badges.badges_of(tenant, users)
        regs = await self._push.registrations_of(tenant, users)
        loop = asyncio.get_running_loop()
        deliveries: list[tuple[str, Delivery]] = []
        for user in users:
            badge, version = badges.get(user, (0, 0))
            offline = []
            for reg in regs.get(user, []):
                if reg.settings.provider not in PROVIDER_NAMES:
                    continue
                name: str = PROVIDER_NAMES[reg.settings.provider]
                if self._online(tenant, user, reg.device_id):
                    self._m.silent.labels(name, "suppressed_online").inc()
                else:
                    offline.append((name, reg))
            chosen = await self._notify.badge_versions(tenant, user, [(r.device_id, version, badge)
                                                                      for _, r in offline], silent=True)
            for (name, reg), got in zip(offline, chosen):
                if got is None:
                    self._m.silent.labels(name, "suppressed_stale").inc()
                    continue
                alert = Alert(badge=badge, badge_version=version, silent=True)
                note = Notification(provider_registration(reg), alert)
                deliveries.append((name, Delivery(tenant, user, reg.device_id, reg.settings.token, note,
                                                  loop.create_future())))
        for _, dl in deliveries:
            await self._sender.submit(dl)
        ends = await asyncio.gather(*(dl.done for _, dl in deliveries))
        for (name, _), end in zip(deliveries, ends):
            self._m.silent.labels(name, end).inc()
