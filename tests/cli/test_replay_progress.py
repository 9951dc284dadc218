"""`qim-loadgen replay` progress and summary (qim/cli/replay_progress.py): everything on
stderr, problems named, nothing printed with --no-progress, stdout untouched."""

from __future__ import annotations

import re

from qim.cli.replay_common import Tally
from qim.cli.replay_progress import ReplayProgress, print_summary


def _tally(**counts) -> Tally:
    t = Tally(conversations=2, messages=10, delivered=9)
    for k, v in counts.items():
        setattr(t, k, v)
    return t


def test_summary_names_every_problem_on_stderr_only(capsys):
    print_summary(_tally(lost=1, unread_wrong=2, not_sent={"PAYLOAD_TOO_LARGE refused locally": 2}), 12.3)
    out, err = capsys.readouterr()
    assert out == ""
    assert "replay in 12 s" in err and "10 / 9" in err
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in err.splitlines()[1:] if line.strip())
    assert rows["lost"] == "1" and rows["unread wrong"] == "2" and rows["duplicated"] == "0"
    assert "PAYLOAD_TOO_LARGE refused locally: 2" in err


def test_no_progress_prints_nothing(capsys):
    with ReplayProgress(3, enabled=False) as p:
        p.dialogue_done(_tally())
        p.history_started(3)
        p.history_done()
    print_summary(_tally(), 1.0, enabled=False)
    assert capsys.readouterr() == ("", "")


def test_progress_counts_dialogues_and_problems(capsys):
    with ReplayProgress(2) as p:
        p.dialogue_done(_tally(duplicated=1))
        p.dialogue_done(_tally())
    out, err = capsys.readouterr()
    assert out == ""
    assert "2/2" in err and "messages 20" in err and "delivered 18" in err and "problems 1" in err


def test_without_a_terminal_a_plain_line_tells_the_run_is_alive(capsys, monkeypatch):
    from qim.cli import replay_progress
    monkeypatch.setattr(replay_progress, "LOG_EVERY_S", 0.0)
    with ReplayProgress(3) as p:  # capsys is not a terminal
        p.dialogue_done(_tally(lost=1))
        p.history_started(3)
        p.history_done(2)
    err = capsys.readouterr().err
    assert "progress: dialogues 2/3  messages 10  delivered 9  problems 1" in err
    assert "progress: history 2/3" in err


def test_a_label_stays_on_the_line_of_its_number_in_a_narrow_terminal(capsys, monkeypatch):
    from qim.cli.replay_history import HistoryResult
    monkeypatch.setenv("COLUMNS", "55")  # a narrow terminal: the old table broke its longest label
    tally = _tally(sdk={"reconnects": 12, "resends": 30, "reconciled": 4, "pushes": 5000})
    tally.history = HistoryResult(conversations=2493, messages=5633, from_cold=3100, mismatched=0)
    print_summary(tally, 340.0)
    err = capsys.readouterr().err
    lines = err.splitlines()
    for label, value in (("messages sent / delivered", "10 / 9"), ("history", "conversations=2493"),
                         ("SDK", "pushes")):
        row = next((line for line in lines if line.strip().startswith(label)), None)
        assert row is not None and value in row, (label, err)
