"""Two real qim-desktop processes in tmux at 80x24, as a new user meets them (issue
18, issue 21 names): a bad command is refused on one line and the client stays up; the
newest message stays in view below long wrapped ones; people are shown by their
display names (`--name`); text typed while the list has the focus reaches the composer;
/quit exits 0. The screens are read with `tmux capture-pane`."""

from __future__ import annotations

from tests.e2e.test_desktop_tmux import DESKTOP, Tmux, desktop_env, quit_both
from tests.sdk.realstack import users

SMALL = (80, 24)


def test_a_new_user_at_80x24(stack, tmp_path):
    a, b = users(2)
    tmux = Tmux(tmp_path)
    env = desktop_env(stack, tmp_path)
    try:
        rc_a = tmux.start("alice", [str(DESKTOP), "--user", str(a), "--name", "Alice", "--chat", str(b)], env, SMALL)
        rc_b = tmux.start("bob", [str(DESKTOP), "--user", str(b), "--name", "Bob", "--chat", str(a)], env, SMALL)
        tmux.wait_for("alice", "online")
        tmux.wait_for("bob", "online")

        tmux.type("alice", f"/dm {a}")
        tmux.key("alice", "Enter")
        shown = tmux.wait_for("alice", "your own user id")
        assert "Traceback" not in shown and "online" in shown and not rc_a.exists()
        tmux.key("alice", *["BSpace"] * len(f"/dm {a}"))  # the refused text stayed in the composer
        tmux.wait_for("alice", f"/dm {a}", gone=True)

        for i in range(6):
            tmux.type("bob", f"long {i} " + "这是一条很长很长的消息，" * 6)
            tmux.key("bob", "Enter")
        tmux.type("bob", "the newest one")
        tmux.key("bob", "Enter")
        shown = tmux.wait_for("alice", "the newest one")
        assert "Bob: " in tmux.wait_for("alice", "Bob: the newest one"), shown

        before = tmux.styles_now("alice")  # the composer has the focus: its cursor blinks
        tmux.key("alice", "BTab")  # the list has the focus; typing goes to the composer anyway
        # as a person does: type once the focus move is drawn (Textual moves it after the
        # key, deferred; on a loaded machine a fixed pause was not always long enough). A
        # screen none of the blink's: the list's highlight and the composer's blurred border
        tmux.wait_redrawn("alice", before)
        tmux.type("alice", "got it 收到")
        tmux.key("alice", "Enter")
        try:
            tmux.wait_for("bob", "Alice: got it 收到")
        except AssertionError as e:
            raise AssertionError(f"{e}\nalice's screen:\n{tmux.screen('alice')}") from None
        quit_both(tmux, rc_a, rc_b)
    finally:
        tmux.kill()
