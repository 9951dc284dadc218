"""tests/failure_logs.py: what a failed stack test adds to its report."""

from pathlib import Path
from types import SimpleNamespace

from tests.failure_logs import LINES_PER_LOG, service_warnings, stack_dirs


def test_only_warnings_and_errors_the_last_few_per_log(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "mailbox.log").write_text(
        "".join(f"t ERROR qim.m [service=mailbox]: fault {i}\n" for i in range(LINES_PER_LOG + 3))
        + "t INFO qim.m [service=mailbox]: ready\n")
    (tmp_path / "logs" / "gateway.log").write_text("t INFO qim.g: ready\n")
    text = service_warnings(tmp_path)
    assert text.splitlines()[0].startswith(f"== mailbox ({LINES_PER_LOG + 3} warnings or errors")
    assert "fault 2\n" not in text + "\n" and f"fault {LINES_PER_LOG + 2}" in text
    assert "ready" not in text and "gateway" not in text


def test_stack_dirs_are_fixture_values_with_logs(tmp_path):
    (tmp_path / "logs").mkdir()
    st = SimpleNamespace(dir=tmp_path)
    found = stack_dirs({"cluster": st, "again": st, "other": SimpleNamespace(dir=Path("/nonexistent")), "n": 3})
    assert found == [tmp_path]
    assert service_warnings(tmp_path / "missing") == ""
