"""Typed reads of QIM_* environment variables (`Env`): each getter validates and raises
ConfigError naming the variable (docs/design.md §11). Default addresses of listeners and
metrics come from the service table (qim/topology.py); the per-service dataclasses built
from it are the other modules of qim/config/."""

from __future__ import annotations

import os
from typing import Mapping, Optional

from qim.consts import DEFAULT_SHARD_COUNT, MAX_MESSAGE_BODY
from qim.errors import ConfigError
from qim.topology import SERVICES, Listener, dials, service
from qim.wire.addr import parse_addr

# every listener of the table by its variable: where its default port comes from
LISTENERS: dict[str, Listener] = {ln.var: ln for s in SERVICES.values() for ln in s.listeners}


class Env:
    """Typed reads of one environment mapping; each getter raises ConfigError by name."""

    def __init__(self, environ: Optional[Mapping[str, str]] = None) -> None:
        self._env = os.environ if environ is None else environ

    def raw(self, name: str) -> str:
        """The variable as set ("" when unset), unvalidated: for presence checks."""
        return self._env.get(name, "")

    def text(self, name: str, default: Optional[str] = None) -> str:
        """A required string (`default` when unset); ConfigError when empty."""
        value = self._env.get(name, default)
        if value is None or value == "":
            raise ConfigError(f"{name} is required")
        return value

    def integer(self, name: str, default: int, lo: int, hi: int) -> int:
        """An integer in lo..hi (decimal, 0x.. hex); `default` when unset."""
        raw = self._env.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw, 0)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not an integer") from None
        if not lo <= value <= hi:
            raise ConfigError(f"{name}={value} is outside {lo}..{hi}")
        return value

    def addr(self, name: str, default: Optional[str] = None) -> str:
        """A 'host:port' address (qim/wire/addr.py form)."""
        value = self.text(name, default)
        try:
            parse_addr(value)
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None
        return value

    def addrs(self, name: str, default: Optional[str] = None) -> tuple[str, ...]:
        """A comma-separated list of at least one 'host:port' address."""
        value = self.text(name, default)
        out = tuple(a.strip() for a in value.split(",") if a.strip())
        if not out:
            raise ConfigError(f"{name} lists no address")
        for a in out:
            try:
                parse_addr(a)
            except ValueError as exc:
                raise ConfigError(f"{name}: {exc}") from None
        return out

    def flag(self, name: str, default: bool = False) -> bool:
        """'1' -> True, '0' -> False, unset or empty -> `default`; anything else is a
        ConfigError."""
        raw = self._env.get(name, "")
        if raw not in ("", "0", "1"):
            raise ConfigError(f"{name}={raw!r} must be 0 or 1")
        return default if raw == "" else raw == "1"

    def shard_count(self) -> int:
        """QIM_MAILBOX_SHARD_COUNT: power of two, validated identically by every service."""
        value = self.integer("QIM_MAILBOX_SHARD_COUNT", DEFAULT_SHARD_COUNT, 1, 65536)
        if value & (value - 1):
            raise ConfigError(f"QIM_MAILBOX_SHARD_COUNT={value} is not a power of two")
        return value

    def max_body(self) -> int:
        """QIM_MAX_MESSAGE_BODY: the body limit in bytes (1 .. the built-in 1 MiB), read the
        same by the gateway (checked before forwarding) and the writer (checked again on
        every WRITER_SEND, whoever sent it)."""
        return self.integer("QIM_MAX_MESSAGE_BODY", MAX_MESSAGE_BODY, 1, MAX_MESSAGE_BODY)

    def metrics_listen(self, name: str) -> str:
        """QIM_<ENV>_METRICS_LISTEN of service `name`, default 127.0.0.1:<its metrics port>
        (docs/design.md §11; the port is the service's row in qim/topology.py)."""
        row = service(name)
        return self.addr(row.metrics_var, f"127.0.0.1:{row.metrics_port}")

    def listen(self, var: str) -> str:
        """A listener's address (QIM_WRITER_LISTEN, QIM_GATEWAY_PUSH_ADDR, ...), default
        127.0.0.1:<its port in qim/topology.py>; KeyError for a variable no row lists."""
        return self.addr(var, f"127.0.0.1:{LISTENERS[var].port}")

    def peers(self, name: str) -> dict[str, tuple[str, ...]]:
        """Addresses of every service `name` dials (qim.topology.dials), by service name:
        each read from the service's QIM_<ENV>_ADDRS (the gateways' QIM_GATEWAY_PUSH_ADDR),
        default its one internal listener on 127.0.0.1."""
        out = {}
        for row in dials(name):
            listener = row.internal_listener
            assert listener is not None  # a row that serves an opcode has an internal listener
            out[row.name] = self.addrs(row.addrs_var, f"127.0.0.1:{listener.port}")
        return out

    def fault_point(self, name: str, listeners: tuple[str, ...], allowed: tuple[str, ...]) -> str:
        """A fault-injection point, honoured only with QIM_FAULT_INJECTION=1 and loopback
        listeners (never in a production configuration). ConfigError otherwise."""
        point = self._env.get(name, "")
        if not point:
            return ""
        if not self.flag("QIM_FAULT_INJECTION"):
            raise ConfigError(f"{name} is set but QIM_FAULT_INJECTION=1 is not")
        for var in listeners:
            host = parse_addr(self._env.get(var, "127.0.0.1:0"))[0]
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise ConfigError(f"{name} requires loopback listeners; {var} is {host}")
        if point not in allowed:
            raise ConfigError(f"{name}={point!r} is not one of {', '.join(allowed)}")
        return point

    def clock_skew(self, name: str, listeners: tuple[str, ...]) -> int:
        """A wall-clock shift in ms (±1 day) for tests of a clock that is behind or ahead;
        honoured only with loopback listeners (never in a production configuration)."""
        skew = self.integer(name, 0, -86_400_000, 86_400_000)
        for var in listeners if skew else ():
            host = parse_addr(self._env.get(var, "127.0.0.1:0"))[0]
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise ConfigError(f"{name} requires loopback listeners; {var} is {host}")
        return skew

    def token_keys(self, name: str = "QIM_TOKEN_PUBLIC_KEYS") -> tuple:
        """QIM_TOKEN_PUBLIC_KEYS: comma-separated paths of the PEM public keys the gateway
        trusts, selected by kid (two during a rotation); qim.wire.tokens.VerifyKey
        objects. ConfigError for an unreadable file, a private key, another key type
        or one key listed twice."""
        from qim.wire.tokens import load_verify_keys  # cryptography: only the gateway loads keys

        try:
            return load_verify_keys(self.text(name).split(","))
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None

    def tenant(self) -> int:
        """QIM_TENANT_ID: a u128 (default 0, single-tenant)."""
        raw = self._env.get("QIM_TENANT_ID", "0")
        try:
            value = int(raw, 0)
        except ValueError:
            raise ConfigError(f"QIM_TENANT_ID={raw!r} is not an integer") from None
        if not 0 <= value < 1 << 128:
            raise ConfigError("QIM_TENANT_ID must be a u128")
        return value
