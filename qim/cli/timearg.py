"""A time given on a qimctl command line (`--from`, `--until`): ISO 8601 or unix ms."""

from __future__ import annotations

import datetime

from qim.errors import ConfigError


def parse_time(raw: str, flag: str = "--from") -> int:
    """TIME -> unix ms: ISO 8601 ("2026-12-05T23:00:00Z", a zone-less one is UTC) or unix
    milliseconds; ConfigError naming `flag` otherwise."""
    if raw.isdigit():
        return int(raw)
    try:
        when = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{flag} {raw!r}: expected an ISO 8601 time (2026-12-05T23:00:00Z) or unix ms") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)
