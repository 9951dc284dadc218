"""qim-desktop on bad input (qim/desktop/cli.py): one line on stderr and exit 2 naming the
option or variable, never a traceback, before any connection is tried (no gateway here:
the endpoint is a closed loopback port that is never reached)."""

from __future__ import annotations

import pytest

from qim.desktop.cli import EXIT_USAGE, main
from qim.wire.tokens import SigningKey


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "dev_key.pem"
    path.write_bytes(SigningKey.generate().private_pem())
    return str(path)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("QIM_TENANT_ID", "QIM_TOKEN", "QIM_DEV_TOKEN_KEY", "QIM_GATEWAY_ADDR"):
        monkeypatch.delenv(name, raising=False)


def run(argv, capsys) -> tuple[int, str]:
    code = main(["--endpoint", "127.0.0.1:1", "--plaintext", *argv])
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("data_dir", ["/etc/passwd", "/etc/passwd/below/it"])
def test_a_data_dir_that_is_a_file_is_named(data_dir, key_file, capsys):
    code, err = run(["--user", "1", "--key", key_file, "--data-dir", data_dir], capsys)
    assert (code, err) == (EXIT_USAGE, f"qim-desktop: error: --data-dir {data_dir}: /etc/passwd is not a directory")


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_a_connect_timeout_that_is_not_positive_is_refused(value, key_file, tmp_path, capsys):
    code, err = run(["--user", "1", "--key", key_file, "--data-dir", str(tmp_path), "--connect-timeout", value], capsys)
    assert code == EXIT_USAGE
    assert err == f"qim-desktop: error: argument --connect-timeout: {value!r} is not a positive number of seconds (see --help)"


def test_a_bad_tenant_variable_is_named(monkeypatch, key_file, tmp_path, capsys):
    monkeypatch.setenv("QIM_TENANT_ID", "zz")
    code, err = run(["--user", "1", "--key", key_file, "--data-dir", str(tmp_path)], capsys)
    assert (code, err) == (EXIT_USAGE, "qim-desktop: error: QIM_TENANT_ID='zz' is not an integer")
