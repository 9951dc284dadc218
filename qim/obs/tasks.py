"""Ends of a node's tasks (qim/obs/node.py): how a background task that ended is named,
and the cancel-and-wait of a stop."""

from __future__ import annotations

import asyncio
from typing import Optional


def task_end(task: asyncio.Task, name: str) -> tuple[str, Optional[BaseException]]:
    """(reason, exception or None) of a background task `name` that is done while the node
    runs: "task N died: Class: message", "task N was cancelled" or "task N ended"."""
    if task.cancelled():
        return f"task {name} was cancelled", None
    exc = task.exception()
    if exc is not None:
        return f"task {name} died: {type(exc).__name__}: {exc}", exc
    return f"task {name} ended", None


async def cancel_all(tasks: set[asyncio.Task], grace_s: float) -> list[str]:
    """Cancel `tasks` and wait (`grace_s`) for them, a second cancel for stragglers;
    returns a line for every task that failed with an error while stopping."""
    tasks = {t for t in tasks if not t.done()}
    if not tasks:
        return []
    for t in tasks:
        t.cancel()
    _, pending = await asyncio.wait(tasks, timeout=grace_s)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=grace_s)
    failed = []
    for t in tasks:  # retrieve every outcome: nothing is logged later as "never retrieved"
        if t.done() and not t.cancelled() and t.exception() is not None:
            exc = t.exception()
            failed.append(f"{t.get_name()} failed while stopping: {type(exc).__name__}: {exc}")
        elif not t.done():
            failed.append(f"{t.get_name()} did not stop within {2 * grace_s} s")
    return failed
