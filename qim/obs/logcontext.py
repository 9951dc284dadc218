"""The request log context: every log line of a service process says where it comes from
and what it is about (docs/operations.md "Tracing"; Synapse's logging/context.py is the
model): `service=… node=…` for the process, and, bound by the code serving a request or a
message, `op=` (opcode name), `rid=` (request id) and `trace=` (the message's trace id,
drawn by the ConversationWriter at commit and carried in the Outbox, dispatch, push and
projection records).

Fields live in a contextvar, so they follow the asyncio task that bound them (a task
created inside a `bind` block inherits them) and never leak to another request.
`ContextFilter` adds them to each record as `%(ctx)s`; qim/app/run.py installs it.
Message ids and user ids are never bound (they are data, not context); bodies and
tokens never are.
"""

from __future__ import annotations

import contextlib
import logging
from contextvars import ContextVar
from types import MappingProxyType
from typing import Iterator, Mapping

_EMPTY: Mapping[str, str] = MappingProxyType({})
_CONTEXT: ContextVar[Mapping[str, str]] = ContextVar("qim_log_context", default=_EMPTY)
_PROCESS: dict[str, str] = {}
ORDER = ("service", "node", "op", "rid", "trace")
TRACE_LOGGER = "qim.trace"  # one DEBUG line per message per stage (QIM_LOG_TRACE=1 shows them)


def set_process(service: str, node: str) -> None:
    """The fields of every line of this process."""
    _PROCESS.update(service=service, node=node)


@contextlib.contextmanager
def bind(**fields: object) -> Iterator[None]:
    """Add `fields` (str() of each; None or b"" values are skipped, bytes as hex) to
    every log line inside the block."""
    add = {k: (v.hex() if isinstance(v, (bytes, bytearray)) else str(v)) for k, v in fields.items()
           if v is not None and v != b""}
    token = _CONTEXT.set({**_CONTEXT.get(), **add})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def current(name: str) -> str:
    """The bound value of `name` ("" when unbound)."""
    return _CONTEXT.get().get(name, "")


def render() -> str:
    """`service=… node=… op=… rid=… trace=…` of what is bound now (known fields first)."""
    fields = {**_PROCESS, **_CONTEXT.get()}
    ordered = [k for k in ORDER if k in fields] + sorted(k for k in fields if k not in ORDER)
    return " ".join(f"{k}={fields[k]}" for k in ordered)


class ContextFilter(logging.Filter):
    """Sets `record.ctx` (render()) on every record it sees."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always True: it only adds the field."""
        record.ctx = render()
        return True


tracer = logging.getLogger(TRACE_LOGGER)
