"""The one table of QIM_* variables (qim/config/variables.py): each service's configuration
reads exactly the rows naming it, no QIM_* name in the code is missing from the table, and
docs/operations.md carries the table as rendered (`python -m qim.config.variables
docs/operations.md` rewrites it)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from qim.config.env import Env
from qim.config.variables import ALL, render_reference, variables
from qim.stores.redis.errors import SCRIPT_REPLIES
from qim.topology import load, processes
from qim.wire.tokens import SigningKey

ROOT = Path(__file__).resolve().parents[2]
# read only on some paths of a configuration (a fault point set, a JWKS instead of key
# files, HTTPS metrics) or outside it (qim/app/run.py): declared, not always recorded
CONDITIONAL = {"QIM_FAULT_INJECTION", "QIM_TOKEN_JWKS", "QIM_TOKEN_JWKS_REFRESH_S"}
# QIM_* words in the code that are not variables: Redis script error codes and name prefixes
# the scripts' refusal texts (QIM_<REASON>, qim/stores/redis/errors.py) are not variables:
# taken from the one table that maps them, so a new refusal needs no line here
NOT_VARIABLES = set(SCRIPT_REPLIES) | {
    "QIM_DEV_TOKEN_SECRET",  # named only by the migration note of qim/wire/devtoken.py: gone
    "QIM_EPOCH_STALE", "QIM_LEASE_LOST", "QIM_FENCED", "QIM_STALE_EPOCH"}


class Recording(Mapping):
    """An environment that remembers every name looked up."""

    def __init__(self, base: dict[str, str]) -> None:
        self.base, self.seen = base, set()

    def __getitem__(self, key: str) -> str:
        self.seen.add(key)
        return self.base[key]

    def get(self, key, default=None):
        self.seen.add(key)
        return self.base.get(key, default)

    def __iter__(self):
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


@pytest.fixture(scope="module")
def base_env():
    with tempfile.TemporaryDirectory() as d:
        pub = Path(d) / "pub.pem"
        pub.write_bytes(SigningKey.generate().verify_key().public_pem())
        yield {"QIM_REDIS_ADDR": "127.0.0.1:6379", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092",
               "QIM_TOKEN_PUBLIC_KEYS": str(pub), "QIM_GATEWAY_PLAINTEXT_DEV": "1",
               "QIM_INTERNAL_PLAINTEXT_DEV": "1", "QIM_SCYLLA_ADDRS": "127.0.0.1:9042",
               # qim-moderation needs its receiver (docs/decisions/0123)
               "QIM_MODERATION_NOTIFY_URL": "https://127.0.0.1:1/notify",
               "QIM_MODERATION_NOTIFY_SECRET": "0123456789abcdef",
               # qim-media needs its bucket and reference key (docs/decisions/0137, 0138)
               "QIM_S3_BUCKET": "qim-media", "QIM_MEDIA_REF_KEY": "k" * 32}


@pytest.mark.parametrize("row", processes(), ids=lambda r: r.name)
def test_each_service_reads_the_rows_that_name_it(row, base_env):
    env = Recording(base_env)
    load(row.config).from_env(Env(env))
    read = {n for n in env.seen if n.startswith("QIM_")}
    table = variables()
    undeclared = sorted(n for n in read if n not in table or not {row.name, ALL} & set(table[n].readers))
    assert not undeclared, f"{row.name} reads variables its table rows do not name: {undeclared}"
    declared = {v.name for v in table.values() if row.name in v.readers}
    assert not sorted(declared - read - CONDITIONAL), f"rows name {row.name} as a reader, but it does not read them"


def test_every_qim_name_in_the_code_is_in_the_table():
    words = set()
    for path in (ROOT / "qim").rglob("*.py"):
        words |= set(re.findall(r"\bQIM_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    missing = sorted(words - set(variables()) - NOT_VARIABLES)
    assert not missing, f"QIM_* names missing from qim/config/variables.py: {missing}"


def test_operations_md_carries_the_reference_as_rendered():
    text = (ROOT / "docs" / "operations.md").read_text()
    assert render_reference() in text, "docs/operations.md is stale: python -m qim.config.variables docs/operations.md"


def test_the_renderer_refuses_bad_arguments_in_one_line(tmp_path, capsys):
    from qim.config.variables import main

    no_block = tmp_path / "other.md"
    no_block.write_text("# no reference block here\n")
    for argv in ([], [str(tmp_path / "missing.md")], [str(no_block)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
    assert no_block.read_text() == "# no reference block here\n"  # nothing written on a refusal
