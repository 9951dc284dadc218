"""What `qim-dev engines up` / `stack up` print of their env file (qim/dev/envshow.py): a
newcomer found the development S3 secret key in the terminal; secrets are masked there,
the file keeps them."""

from __future__ import annotations

from qim.dev.envshow import is_secret, shown

FILE = """# qim-dev engines
QIM_S3_ENDPOINT=http://127.0.0.1:9000
QIM_S3_ACCESS_KEY=qimdev
QIM_S3_SECRET_KEY=qimdevsecret
QIM_MEDIA_REF_KEY=0123456789abcdef0123456789abcdef012
QIM_DB_PASSWORD=hunter2
QIM_DEV_TOKEN_KEY=/x/dev_token_key.pem
QIM_WEBHOOK_SECRET=
"""


def test_secret_values_are_masked_and_everything_else_kept():
    out = shown(FILE)
    for value in ("qimdevsecret", "0123456789abcdef", "hunter2"):
        assert value not in out
    assert "QIM_S3_SECRET_KEY=<hidden: see the env file>\n" in out
    assert "QIM_MEDIA_REF_KEY=<hidden: see the env file>\n" in out
    kept = [ln for ln in FILE.splitlines() if "SECRET_KEY" not in ln and "REF_KEY" not in ln and "PASSWORD" not in ln]
    assert [ln for ln in out.splitlines() if "<hidden" not in ln] == kept  # paths, addresses, comments, empties
    assert shown("A=1") == "A=1" and shown("") == ""


def test_which_names_are_secret():
    assert is_secret("QIM_S3_SECRET_KEY") and is_secret("QIM_MEDIA_REF_KEY") and is_secret("X_PASSWORD")
    assert not is_secret("QIM_S3_ACCESS_KEY") and not is_secret("QIM_DEV_TOKEN_KEY") and not is_secret("QIM_CA_FILE")


def test_engines_up_prints_the_env_file_masked(monkeypatch, tmp_path, capsys):
    """`qim-dev engines up` prints its env file through shown(); the file keeps the values."""
    from qim.dev import cli

    env_path = tmp_path / "engines.env"
    env_path.write_text(FILE)

    class Started:
        """What EngineSet.up returns, as `engines up` reads it."""

        def __init__(self) -> None:
            self.env_path = env_path

    monkeypatch.setattr(cli.EngineSet, "up", staticmethod(lambda *a, **kw: Started()))
    assert cli.main(["engines", "up", "--dir", str(tmp_path), "--without-cassandra"]) == 0
    out = capsys.readouterr().out
    assert "QIM_S3_SECRET_KEY=<hidden: see the env file>" in out and "qimdevsecret" not in out
    assert "QIM_S3_ENDPOINT=http://127.0.0.1:9000" in out and str(env_path) in out
    assert "QIM_S3_SECRET_KEY=qimdevsecret" in env_path.read_text()
