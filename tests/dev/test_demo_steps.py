"""`make demo` as a newcomer meets it (docs/decisions/0085), without running it: the
recipe (`make -n`) installs the page's tools first, replays a short corpus unless
DEMO_FULL=1, and ends with qim-web and the next steps; the next-steps block names the two
terminal commands, the web address, a second device and `make down`; progress lines are
printed only when a command turns them on; `stack up` says why it restarts a running
stack (every reason: node counts and archive settings); `qimctl` without the stack's addresses says to load stack.env."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from qim.dev import demo_next, progress
from qim.dev.stack_cli import restart_words

ROOT = Path(__file__).resolve().parents[2]


def dry_run(*args: str) -> list[str]:
    done = subprocess.run(["make", "-n", "--no-print-directory", "demo", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def first(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


def test_the_demo_recipe_installs_the_page_tools_replays_a_short_corpus_and_ends_with_next_steps():
    lines = dry_run()
    replay = first(lines, "qim-loadgen replay")
    assert "--limit 300" in lines[replay], lines[replay]
    assert first(lines, "fonts-noto-cjk") < replay, "the page's fonts are installed before the replay"
    assert first(lines, "qim-dev stack up") < replay
    assert replay < first(lines, "qim-web --port") < first(lines, "qim.dev.demo_next"), "the address comes last"
    assert sum("npm run build" in line for line in lines) == 1, "the page is built once"
    # buf and tsc are silent for a minute: a line says what is being done first (decision 0093)
    assert "web-build: protobuf code (buf), type check (tsc)" in lines[first(lines, "npm run build") - 1]
    assert "qim.dev.demo_next" in lines[-1], lines[-3:]
    full = dry_run("DEMO_FULL=1")
    assert "--limit 0" in full[first(full, "qim-loadgen replay")]


def test_next_steps_name_both_terminals_the_page_media_a_second_device_and_make_down():
    text = "\n".join(demo_next.next_steps(True, 8088, True))
    assert "qim-desktop --user 1001 --name Alice --chat 1002" in text
    assert "qim-desktop --user 1002 --name Bob --chat 1001" in text
    assert "http://127.0.0.1:8088/" in text and "--data-dir" in text and "make down" in text
    assert "set -a; . .qim/stack/stack.env; set +a" in text
    assert "/attach PATH" in text and "/save [N] PATH" in text  # the newest features are named (issue 40)
    offline = "\n".join(demo_next.next_steps(True, 8088, False))
    assert "http://" not in offline and "make web-up" in offline


def test_next_steps_read_the_stack_and_qim_webs_pid(tmp_path):
    (tmp_path / "stack").mkdir()
    (tmp_path / "stack" / "stack.env").write_text("QIM_GATEWAY_ADDR=127.0.0.1:1\n")
    (tmp_path / "web.pid").write_text(str(os.getpid()))  # a live pid: qim-web is "running"
    run = [sys.executable, "-m", "qim.dev.demo_next", "--stack-dir", str(tmp_path / "stack"), "--web-port", "9123",
           "--web-pid", str(tmp_path / "web.pid")]
    done = subprocess.run(run, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0 and "http://127.0.0.1:9123/" in done.stdout, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "  stop everything: make down"
    (tmp_path / "stack" / "stack.env").unlink()
    done = subprocess.run(run, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 1 and "the stack is not up" in done.stdout


def test_progress_lines_only_when_turned_on(capsys, monkeypatch):
    monkeypatch.setattr(progress, "_started", None)
    progress.note("kafka ready")
    assert capsys.readouterr().err == ""
    progress.enable("engines")
    progress.note("kafka ready at 127.0.0.1:9")
    err = capsys.readouterr().err
    assert err.startswith("engines: kafka ready at 127.0.0.1:9 (") and err.endswith(" s)\n"), err
    monkeypatch.setattr(progress, "_started", None)


class Running:
    """A recorded stack as restart_words reads it."""

    def __init__(self, counts: dict[str, int], env: dict[str, str]) -> None:
        self.counts, self.env = counts, env

    def count(self, service: str) -> int:
        return self.counts.get(service, 1)


def test_stack_up_says_why_it_restarts_every_service():
    line = restart_words(Running({"gateway": 1}, {}), {"gateway": 2, "mailbox": 1}, {})
    assert line.startswith("stack: restarting every service for new node counts (gateway 1 -> 2)"), line
    assert "reconnect" in line and "data stay" in line
    demo = Running({}, {"QIM_HISTORY_HOT_WINDOW_MS": "5000"})
    line = restart_words(demo, {}, {})
    assert "archive-tier settings (QIM_HISTORY_HOT_WINDOW_MS 5000 -> default" in line, line


def test_stack_up_names_both_new_node_counts_and_the_demos_archive_settings_it_drops():
    # the operations.md recipe after `make demo`: more nodes, and (silently before decision 0093)
    # the demo's 5 s hot window back to the default
    demo = Running({"gateway": 1}, {"QIM_HISTORY_HOT_WINDOW_MS": "5000", "QIM_OUTBOX_RETENTION_MS": "2000"})
    line = restart_words(demo, {"gateway": 2, "mailbox": 3}, {})
    assert "new node counts (gateway 1 -> 2, mailbox 1 -> 3) and other archive-tier settings (" in line, line
    assert "QIM_HISTORY_HOT_WINDOW_MS 5000 -> default" in line and "QIM_OUTBOX_RETENTION_MS 2000 -> default" in line


def test_qimctl_without_the_stack_addresses_says_to_load_stack_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    done = subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "shards"], env=env, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and ". .qim/stack/stack.env" in done.stderr, done.stderr
