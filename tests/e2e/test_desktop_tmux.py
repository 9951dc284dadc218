"""Two real qim-desktop processes in tmux against the real stack ("a test
drives two qim-desktop instances through a conversation with Chinese text and a
recall"). Keys are typed with `tmux send-keys` and the screens read with
`tmux capture-pane`, as a person would see them. tmux comes from Debian; `make test`
installs it when missing, and without it this test FAILS with that instruction."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.sdk.realstack import users

DESKTOP = Path(sys.executable).parent / "qim-desktop"


class Tmux:
    """A tmux server of this test's own (its own socket), killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        exe = shutil.which("tmux")
        if exe is None:
            pytest.fail("tmux is not installed: `apt-get install -y tmux` (make test does this)", pytrace=False)
        # a socket of this instance's own: a server an earlier test left (its kill-server
        # still under way) must not answer this test's new-session with "duplicate session"
        self.base = [exe, "-u", "-L", f"qim-desktop-test-{os.getpid()}-{uuid.uuid4().hex[:8]}", "-f", "/dev/null"]
        self.tmp = tmp_path

    def run(self, *args: str) -> str:
        done = subprocess.run(self.base + list(args), capture_output=True, text=True,
                              encoding="utf-8", env={**os.environ, "LANG": "C.UTF-8"})
        assert done.returncode == 0, f"tmux {args[0]} exited {done.returncode}: {done.stderr.strip()!r}"
        return done.stdout

    def start(self, name: str, argv: list[str], env: dict[str, str], size: tuple[int, int] = (120, 36)) -> Path:
        """Run argv in a window of `size` (columns, rows); returns the file its exit code is written to."""
        rc = self.tmp / f"{name}.rc"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        cmd = f"env {exports} {shlex.join(argv)}; echo $? > {shlex.quote(str(rc))}; sleep 60"
        self.run("new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]), cmd)
        return rc

    def type(self, name: str, text: str) -> None:
        self.run("send-keys", "-t", name, "-l", text)

    def key(self, name: str, *keys: str) -> None:
        self.run("send-keys", "-t", name, *keys)

    def screen(self, name: str) -> str:
        return self.run("capture-pane", "-p", "-t", name)

    def styled(self, name: str) -> str:
        """The screen with its colours (escape sequences): where the focus is shows here."""
        return self.run("capture-pane", "-p", "-e", "-t", name)

    def styles_now(self, name: str, seconds: float = 1.2) -> set[str]:
        """Every styled screen shown over `seconds`: the composer's cursor blinks (0.5 s),
        so a still screen is more than one capture."""
        end = time.monotonic() + seconds
        seen = {self.styled(name)}
        while time.monotonic() < end:
            time.sleep(0.1)
            seen.add(self.styled(name))
        return seen

    def wait_redrawn(self, name: str, before: set[str], timeout: float = 30.0) -> str:
        """Wait until the styled screen is none of `before` (a key's effect is drawn)."""
        end = time.monotonic() + timeout
        while (shown := self.styled(name)) in before:
            assert time.monotonic() < end, f"{name}: screen not redrawn in {timeout} s:\n{self.screen(name)}"
            time.sleep(0.1)
        return shown

    def wait_for(self, name: str, text: str, timeout: float = 30.0, gone: bool = False) -> str:
        end = time.monotonic() + timeout
        while True:
            shown = self.screen(name)
            if (text not in shown) if gone else (text in shown):
                return shown
            assert time.monotonic() < end, f"{name}: {text!r} {'still' if gone else 'not'} on screen:\n{shown}"
            time.sleep(0.2)

    def kill(self) -> None:
        subprocess.run(self.base + ["kill-server"], capture_output=True)


def desktop_env(stack, tmp_path: Path) -> dict[str, str]:
    """What a person's shell holds after sourcing stack.env (and a data dir of the test's own)."""
    return {"QIM_GATEWAY_ADDR": stack.gateway_addr, "QIM_DEV_TOKEN_KEY": stack.token_key,
            "QIM_DATA_DIR": str(tmp_path / "data"), "LANG": "C.UTF-8", "TERM": "xterm-256color",
            "PATH": os.environ.get("PATH", ""), "QIM_CA_FILE": stack.ca_file}


def quit_both(tmux: Tmux, rc_a: Path, rc_b: Path) -> None:
    """/quit in alice's window, Ctrl+Q in bob's: both exit 0."""
    tmux.type("alice", "/quit")
    tmux.key("alice", "Enter")
    assert wait_file(rc_a) == "0"
    tmux.key("bob", "C-q")
    assert wait_file(rc_b) == "0"


def wait_file(path: Path, timeout: float = 20.0) -> str:
    end = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < end, f"{path.name}: the process did not exit"
        time.sleep(0.1)
    return path.read_text().strip()


def test_two_desktops_chat_in_chinese_and_recall(stack, tmp_path):
    a, b = users(2)
    tmux = Tmux(tmp_path)
    env = desktop_env(stack, tmp_path)
    try:
        rc_a = tmux.start("alice", [str(DESKTOP), "--user", str(a), "--chat", str(b)], env)
        rc_b = tmux.start("bob", [str(DESKTOP), "--user", str(b), "--chat", str(a)], env)
        tmux.wait_for("alice", "online")
        tmux.wait_for("bob", "online")

        tmux.type("alice", "你好，世界 🌏")
        tmux.key("alice", "C-j")
        tmux.type("alice", "第二行：晚上见")
        tmux.key("alice", "Enter")
        shown = tmux.wait_for("bob", "第二行：晚上见")
        assert "你好，世界 🌏" in shown and f"{a}: " in shown

        tmux.type("bob", "收到！👍 [不是标记]")
        tmux.key("bob", "Enter")
        tmux.wait_for("alice", "收到！👍 [不是标记]")

        tmux.type("alice", "/recall")
        tmux.key("alice", "Enter")
        shown = tmux.wait_for("bob", "(message recalled)")
        assert "你好，世界" not in shown and "收到！👍" in shown
        tmux.wait_for("alice", "(message recalled)")
        quit_both(tmux, rc_a, rc_b)
    finally:
        tmux.kill()
