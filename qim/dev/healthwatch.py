"""The development supervisor's health watch (docs/operations.md "Supervision";
docs/decisions/0074-supervision-acts-on-health.md): a process that is alive but useless
is restarted like one that died.

A thread polls every supervised service's /healthz each POLL_S. A service whose answer
has not been 200 (503 with its reasons, or no answer at all: a hung process) for longer
than `unhealthy_s` (UNHEALTHY_RESTART_S = 30 s by default; `qim-dev stack up
--unhealthy-restart-s`) after it had been healthy since its start, or that has not been
healthy once within `start_grace_s` (START_GRACE_S) of its start, is `overdue()`: the
supervisor stops it (SIGTERM, SIGKILL after the stop timeout), counts a restart and
starts it again (qim/dev/supervisor.py). The same numbers are the systemd units'
WatchdogSec and TimeoutStartSec (qim/dev/units.py).

An engine away holds the clock (docs/decisions/0091-an-engine-away-holds-the-health-clock.md):
while `away()` names one (Redis, every broker or every Cassandra node unreachable:
qim/obs/engine_probe.py), a service failing because of it is not at fault and a restart
cannot cure it, so neither limit runs: each counts from the later of its own start (or
first failure) and the last poll that saw an engine away. Once the engines are back a
service has the full limit to heal itself (it takes its leases again within one lease);
one that does not is restarted as usual. Before this rule a Redis away for longer than
the limit restarted every service, gateways and their devices included, and again at
every start grace for as long as it stayed away.

A start that keeps missing the grace backs off (decision 0091): each restart for not
being healthy within the grace doubles the next start's grace (120, 240, 480 s, at most
GRACE_MAX_FACTOR times), and the first 200 brings it back to START_GRACE_S. A service
that merely starts slowly on a loaded machine (a mailbox catching up a long backlog)
then gets there at the second or third try instead of being cut off every 120 s for ever.

Why 30 s: longer than the outages a node rides out by itself while unhealthy (a lease
of 6 s in development and 10 s in production lost and taken again, a Redis restart of
about 13 s, a broker election), short enough that a node stuck at 503 (issue 33: 3.5
and 15 minutes) is back within a minute.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable, Optional

UNHEALTHY_RESTART_S = 30.0
START_GRACE_S = 120.0  # a start waits for engines, leases and peers' links: well under this
GRACE_MAX_FACTOR = 8  # a start grace doubles per miss in a row up to this many times START_GRACE_S
POLL_S = 1.0

log = logging.getLogger("qim.dev.supervisor")


class HealthWatch:
    """/healthz of each named service, polled in a thread (module doc).

    `probe(name)` -> (HTTP status, body) with 0 for no answer (Stack.healthz);
    `names()` -> the services to watch now (those with a running process);
    `away()` -> why an engine is away, or None (qim/obs/engine_probe.py; default: never).
    ValueError for a limit that is not a finite number > 0."""

    def __init__(self, probe: Callable[[str], tuple[int, str]], names: Callable[[], Iterable[str]],
                 unhealthy_s: float = UNHEALTHY_RESTART_S, start_grace_s: float = START_GRACE_S,
                 poll_s: float = POLL_S, away: Optional[Callable[[], Optional[str]]] = None) -> None:
        if not 0 < unhealthy_s < float("inf"):  # NaN too: every comparison with it is False
            raise ValueError(f"unhealthy_s must be a number > 0, got {unhealthy_s}")
        self._probe, self._names, self._away = probe, names, away
        self.away_at: Optional[float] = None  # the last poll that saw an engine away
        self._away_why: Optional[str] = None  # set while an episode lasts (logged once)
        self.unhealthy_s, self.start_grace_s, self._poll_s = unhealthy_s, max(start_grace_s, unhealthy_s), poll_s
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}  # name -> when its process started
        self._healthy_once: set[str] = set()
        self._grace_misses: dict[str, int] = {}  # name -> starts in a row not healthy within their grace
        self._failing: dict[str, tuple[float, int, str]] = {}  # name -> (since, status, first line)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def started(self, name: str) -> None:
        """A new process of `name` started: its start grace begins, nothing is failing yet."""
        with self._lock:
            self._started[name] = time.monotonic()
            self._healthy_once.discard(name)
            self._failing.pop(name, None)

    def forget(self, name: str) -> None:
        """`name` is not running (died, stopped): nothing to judge until it starts again."""
        with self._lock:
            self._started.pop(name, None)
            self._failing.pop(name, None)

    def observe(self, name: str, status: int, body: str, now: Optional[float] = None) -> None:
        """Record one answer of `name`'s /healthz (0: none)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if name not in self._started:
                return
            if status == 200:
                self._healthy_once.add(name)
                self._grace_misses.pop(name, None)
                self._failing.pop(name, None)
            elif name not in self._failing:
                line = (body.strip().splitlines() or ["no answer"])[0][:200]
                self._failing[name] = (now, status, line)

    def overdue(self, now: Optional[float] = None) -> list[tuple[str, str]]:
        """(name, why) of every service to restart now (module doc); each is forgotten
        until `started()` again."""
        now = time.monotonic() if now is None else now
        out = []
        held = self.away_at if self.away_at is not None else float("-inf")
        with self._lock:
            for name, started in list(self._started.items()):
                failing = self._failing.get(name)
                if name in self._healthy_once:
                    if failing is None or now - max(failing[0], held) <= self.unhealthy_s:
                        continue
                    since, status, line = failing
                    why = f"unhealthy for {now - since:.1f}s (/healthz {status or 'no answer'}: {line})"
                elif now - max(started, held) > self.grace_s(name):
                    why = f"not healthy within {self.grace_s(name):.0f}s of its start"
                    if failing is not None:
                        why += f" (/healthz {failing[1] or 'no answer'}: {failing[2]})"
                    self._grace_misses[name] = self._grace_misses.get(name, 0) + 1
                    if self._grace_misses[name] > 1:
                        why += f"; {self._grace_misses[name]} starts in a row"
                    why += f"; the next start has {self.grace_s(name):.0f}s"
                else:
                    continue
                out.append((name, why))
                self._started.pop(name)
                self._failing.pop(name, None)
        return out

    def grace_s(self, name: str) -> float:
        """The start grace of `name`'s current start: START_GRACE_S doubled per start in a
        row that missed it, at most GRACE_MAX_FACTOR times (module doc)."""
        return self.start_grace_s * min(2 ** self._grace_misses.get(name, 0), GRACE_MAX_FACTOR)

    def engines_seen(self, why: Optional[str], now: Optional[float] = None) -> None:
        """Record one probe of the engines: `why` one is away, or None (module doc).
        Logs the start and the end of each episode once."""
        now = time.monotonic() if now is None else now
        if why is not None:
            self.away_at = now
            if self._away_why is None:
                log.warning("engine away (%s): the health clock is held, no service is restarted for it", why)
            self._away_why = why
        elif self._away_why is not None:
            log.warning("engines back: each service has %.0fs to be healthy again", self.unhealthy_s)
            self._away_why = None

    def poll(self) -> None:
        """Probe the engines, then every watched service, once."""
        if self._away is not None:
            self.engines_seen(self._away())
        for name in list(self._names()):
            if self._stop.is_set():
                return
            with self._lock:
                watched = name in self._started
            if watched:
                status, body = self._probe(name)
                self.observe(name, status, body)

    def start(self) -> None:
        """Poll in a daemon thread until `stop()`."""
        def loop() -> None:
            while not self._stop.wait(self._poll_s):
                self.poll()
        self._thread = threading.Thread(target=loop, name="healthwatch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the polling thread (waits for the poll in progress)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
