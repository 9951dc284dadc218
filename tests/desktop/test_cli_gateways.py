"""qim-desktop with several gateways (issue 34 item 2; docs/decisions/0082): --endpoint
takes a comma-separated list (default $QIM_GATEWAY_ADDRS), --deployment (default
$QIM_DEPLOYMENT) names the store whichever gateway is given, so pointing the client at
gateway 2 is the same device as gateway 1. No gateway runs here: closed loopback ports."""

from __future__ import annotations

import glob
import os

import pytest

from qim.desktop.cli import EXIT_USAGE, build_parser, main
from qim.wire.tokens import SigningKey

G1, G2 = "127.0.0.1:1", "127.0.0.1:2"  # closed ports: every connect fails at once


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "dev_key.pem"
    path.write_bytes(SigningKey.generate().private_pem())
    return str(path)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("QIM_TENANT_ID", "QIM_TOKEN", "QIM_DEV_TOKEN_KEY", "QIM_GATEWAY_ADDR", "QIM_GATEWAY_ADDRS",
                 "QIM_DEPLOYMENT"):
        monkeypatch.delenv(name, raising=False)


def test_the_gateways_and_the_deployment_come_from_stack_env():
    args = build_parser({"QIM_GATEWAY_ADDR": G1, "QIM_GATEWAY_ADDRS": f"{G1},{G2}", "QIM_DEPLOYMENT": G1}).parse_args([])
    assert (args.endpoint, args.deployment) == (f"{G1},{G2}", G1)
    args = build_parser({"QIM_GATEWAY_ADDR": G1}).parse_args([])
    assert (args.endpoint, args.deployment) == (G1, None)


def stores(data_dir) -> list[str]:
    return sorted(glob.glob(os.path.join(str(data_dir), "**", "*.sqlite3"), recursive=True))


def test_gateway_2_of_the_deployment_is_the_same_store(key_file, tmp_path, capsys):
    data = ["--user", "7", "--key", key_file, "--data-dir", str(tmp_path / "d"), "--plaintext",
            "--connect-timeout", "5"]
    assert main(["--endpoint", f"{G1},{G2}", *data]) == EXIT_USAGE  # both tried, neither answers
    err = capsys.readouterr().err
    assert "cannot" in err or "no answer" in err, err
    (first,) = stores(tmp_path / "d")
    assert main(["--endpoint", G2, "--deployment", G1, *data]) == EXIT_USAGE
    assert stores(tmp_path / "d") == [first]  # gateway 2 alone: the same device and store
    capsys.readouterr()


def test_a_bad_address_in_the_list_is_named(key_file, tmp_path, capsys):
    code = main(["--endpoint", f"{G1},nonsense", "--plaintext", "--user", "7", "--key", key_file,
                 "--data-dir", str(tmp_path)])
    assert code == EXIT_USAGE
    assert capsys.readouterr().err.strip().startswith("qim-desktop: error: --endpoint:")
