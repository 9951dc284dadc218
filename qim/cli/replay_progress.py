"""Progress and summary of `qim-loadgen replay` on stderr (rich): a person watching `make demo` sees it move.

The replay's verdict lines stay on stdout and last; everything here goes to stderr so
a script that reads the last line, or a pipe, sees the same output with or without a
terminal. Without a terminal rich prints no animation, only the final state.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from qim.cli.replay_common import Tally

LOG_EVERY_S = 30.0  # without a terminal: one progress line this often


class ReplayProgress:
    """A bar of dialogues done (with messages sent and problems so far), then a bar of
    conversations whose history was read again. `enabled=False` prints nothing.
    Use as a context manager; `dialogue_done(tally)` after each dialogue."""

    def __init__(self, dialogues: int, enabled: bool = True) -> None:
        self._console = Console(stderr=True)
        self._enabled = enabled
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[note]}"), TimeElapsedColumn(),
                                  console=self._console, disable=not enabled)
        self._dialogues = self._progress.add_task("dialogues", total=dialogues, note="")
        self._history: Optional[TaskID] = None
        self._seen = Tally()
        self._total = dialogues
        self._plain = enabled and not self._console.is_terminal
        self._started = self._logged = time.monotonic()

    def __enter__(self) -> "ReplayProgress":
        self._progress.start()
        return self

    def __exit__(self, et: Optional[type], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self._progress.stop()

    def dialogue_done(self, tally: Tally) -> None:
        """One dialogue (or group dialogue) finished with these counts."""
        self._seen.add(tally)
        s = self._seen
        problems = s.lost + s.duplicated + s.out_of_order + s.corrupt + s.unread_wrong
        note = f"messages {s.messages}  delivered {s.delivered}  problems {problems}"
        self._progress.update(self._dialogues, advance=1, note=note)
        self._log(f"dialogues {s.conversations}/{self._total}  {note}")

    def history_started(self, conversations: int) -> None:
        """The history check begins over `conversations` conversations."""
        self._history = self._progress.add_task("history", total=conversations, note="")

    def history_done(self, n: int = 1) -> None:
        """`n` more conversations' histories were read and compared."""
        if self._history is not None:
            self._progress.update(self._history, advance=n)
            task = self._progress.tasks[self._history]
            self._log(f"history {task.completed:.0f}/{task.total:.0f}")

    def _log(self, what: str) -> None:
        now = time.monotonic()
        if self._plain and now - self._logged >= LOG_EVERY_S:
            self._logged = now
            self._console.print(f"progress: {what} ({now - self._started:.0f} s)", soft_wrap=True)


def print_summary(total: Tally, elapsed_s: float, enabled: bool = True) -> None:
    """A readable table of the run on stderr (the verdict lines follow on stdout)."""
    if not enabled:
        return
    t = Table(title=f"replay in {elapsed_s:.0f} s", show_header=False, box=None, padding=(0, 2))
    # a label never wraps away from its number: the value column folds instead
    t.add_column(no_wrap=True, min_width=len("messages sent / delivered"))
    t.add_column(overflow="fold")  # wraps at spaces; only a word longer than the column is folded
    problems = {"lost": total.lost, "duplicated": total.duplicated, "out of order": total.out_of_order,
                "corrupt": total.corrupt, "unread wrong": total.unread_wrong}
    t.add_row("conversations", str(total.conversations))
    t.add_row("messages sent / delivered", f"{total.messages} / {total.delivered}")
    t.add_row("recalled", str(total.recalled))
    for name, n in problems.items():
        t.add_row(name, f"[red]{n}[/red]" if n else "0")
    if total.not_sent:
        t.add_row("not sent", ", ".join(f"{k}: {n}" for k, n in sorted(total.not_sent.items())))
    if total.by_mode:
        t.add_row("modes", ", ".join(f"{k}: {n}" for k, n in sorted(total.by_mode.items())))
    if total.sdk:
        t.add_row("SDK", ", ".join(f"{k}: {n}" for k, n in sorted(total.sdk.items()) if n))
    if total.history is not None:
        t.add_row("history", total.history.line().removeprefix("history: "))
    Console(stderr=True).print(t)
