"""Shared pieces of the replay: the tally and the runtime teardown."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Tally:
    """Counters of one run (or one dialogue); `add` merges."""

    conversations: int = 0
    messages: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    by_mode: dict = field(default_factory=dict)
    sdk: dict = field(default_factory=dict)  # summed ClientRuntime.stats (reconnects, resends, ...)

    def add(self, other: "Tally") -> None:
        for name in ("conversations", "messages", "delivered", "lost", "duplicated", "out_of_order"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for mine, theirs in ((self.by_mode, other.by_mode), (self.sdk, other.sdk)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n

    @property
    def ok(self) -> bool:
        return self.delivered == self.messages and self.lost == self.duplicated == self.out_of_order == 0

    def line(self) -> str:
        return (f"replay: conversations={self.conversations} messages={self.messages} "
                f"delivered={self.delivered} lost={self.lost} duplicated={self.duplicated} "
                f"out_of_order={self.out_of_order}")


async def close_runtimes(rts, t: Tally) -> None:
    """Add each runtime's stats to `t`, then close the runtime and its store."""
    for rt in rts:
        for key, n in rt.stats.items():
            t.sdk[key] = t.sdk.get(key, 0) + n
        await rt.close()
        rt.store.close()
