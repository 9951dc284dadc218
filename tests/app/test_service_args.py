"""`qim-<service>` arguments (qim/app/main.py): --help prints the usage naming the service
and the configuration reference and exits 0, any other argument exits 2, both before
the configuration is read or anything is started. No engine: run_node is replaced by a
function that fails the test if it is reached."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import qim.app.main as app_main
from qim.topology import processes

ROOT = Path(__file__).resolve().parents[2]
NAMES = [s.name for s in processes()]


@pytest.fixture(autouse=True)
def never_started(monkeypatch):
    def started(*_a, **_k):
        raise AssertionError("the service was started")

    monkeypatch.setattr(app_main, "run_node", started)
    monkeypatch.setenv("QIM_EVENT_LOOP", "bogus")  # reading the configuration would fail with exit 2


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_of_a_console_script_exits_0_without_starting(name, flag, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [f"qim-{name}", flag])
    with pytest.raises(SystemExit) as exc:
        getattr(app_main, name)()  # what the console script qim-<name> calls
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: qim-{name} [-h]")
    assert "docs/operations.md" in out and "qim/config/variables.py" in out


@pytest.mark.parametrize("argv", [["--port", "1"], ["extra"]])
def test_any_other_argument_exits_2_without_starting(argv, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["qim-writer", *argv])
    with pytest.raises(SystemExit) as exc:
        app_main.writer()
    assert exc.value.code == 2
    assert "qim-writer: error: unrecognized arguments" in capsys.readouterr().err


def test_no_argument_goes_on_to_the_configuration(monkeypatch):
    reached = []
    monkeypatch.setattr(app_main, "run_node", lambda name, build: reached.append(name))
    monkeypatch.setattr(sys, "argv", ["qim-writer"])
    app_main.writer()
    assert reached == ["writer"]


def test_python_m_qim_app_passes_the_arguments_after_the_service_name():
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "QIM_EVENT_LOOP": "bogus"}
    run = [sys.executable, "-m", "qim.app"]
    helped = subprocess.run(run + ["writer", "--help"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: qim-writer"), helped.stderr
    refused = subprocess.run(run + ["writer", "x"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "unrecognized arguments: x" in refused.stderr
    # the way the stack and the systemd units start a service still reads its configuration
    started = subprocess.run(run + ["writer"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert started.returncode == 2 and "QIM_EVENT_LOOP" in started.stderr and "Traceback" not in started.stderr
