"""The log context (qim/obs/logcontext.py): every record gets `ctx` with the process's
service and node and what the code serving it bound; a binding follows its asyncio task
and ends with its block, never leaking into another request."""

from __future__ import annotations

import asyncio
import logging

from qim.obs import logcontext


def _ctx_of(logger: logging.Logger, text: str, records: list) -> str:
    logger.info(text)
    return next(r.ctx for r in records if r.getMessage() == text)


async def test_fields_follow_the_task_and_end_with_the_block():
    logcontext.set_process("gateway", "gateway2")
    records: list = []
    handler = logging.Handler()
    handler.emit = records.append
    handler.addFilter(logcontext.ContextFilter())
    log = logging.getLogger("qim.test.logcontext")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        async def request(rid: int, trace: bytes) -> str:
            with logcontext.bind(op="SEND_MESSAGE", rid=rid, trace=trace):
                await asyncio.sleep(0.01)  # another request runs meanwhile
                return _ctx_of(log, f"serving {rid}", records)

        a, b = await asyncio.gather(request(1, b"\x01" * 16), request(2, b""))
        assert a == "service=gateway node=gateway2 op=SEND_MESSAGE rid=1 trace=" + "01" * 16
        assert b == "service=gateway node=gateway2 op=SEND_MESSAGE rid=2"  # an empty trace is not bound
        assert _ctx_of(log, "after", records) == "service=gateway node=gateway2"
        assert logcontext.current("trace") == ""
    finally:
        log.removeHandler(handler)
