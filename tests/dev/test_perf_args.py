"""`python -m qim.dev.perf` (make perf) checks every option and PERF_* value before
anything starts: exit 2 with one line `perf: <what is wrong>` naming the option or the
variable. Nothing is started here: the connection step and the stack are replaced by
stand-ins that fail the test if reached."""

from __future__ import annotations

import pytest

from qim.dev import perf, perf_args


@pytest.fixture(autouse=True)
def nothing_starts(monkeypatch):
    for name in list(__import__("os").environ):
        if name.startswith("PERF_"):
            monkeypatch.delenv(name)

    def reached(*_a, **_k):
        raise AssertionError("perf started work before checking its options")

    monkeypatch.setattr(perf, "_connection_step", reached)
    monkeypatch.setattr(perf.Bench, "up", reached)


@pytest.mark.parametrize("argv,env,message", [
    (["--rates", "abc"], {}, "--rates must be comma-separated numbers > 0, got 'abc'"),
    (["--rates", "-5"], {}, "--rates must be comma-separated numbers > 0, got '-5'"),
    (["--rates", "25,nan"], {}, "--rates must be comma-separated numbers > 0, got '25,nan'"),
    (["--pairs", "0"], {}, "--pairs must be an integer >= 1, got '0'"),
    (["--sdk-clients", "3"], {}, "--sdk-clients must be 0 or an even integer, got '3'"),
    (["--sdk-clients", "abc"], {}, "--sdk-clients must be 0 or an even integer, got 'abc'"),
    (["--seconds", "-1"], {}, "--seconds must be a number > 0, got '-1'"),
    (["--hold-seconds", "-1"], {}, "--hold-seconds must be a number > 0, got '-1'"),
    (["--connections", "100"], {}, "--connections must be 0 or an integer > 500 (the warm-up), got '100'"),
    ([], {"PERF_TOPOLOGY": "bogus"}, "PERF_TOPOLOGY must be single or scaled, got 'bogus'"),
    (["--brokers", "2"], {}, "--brokers must be 1 or 3, got '2'"),
    ([], {"PERF_BROKERS": "three"}, "PERF_BROKERS must be 1 or 3, got 'three'"),
    (["--redis", "0"], {}, "--redis must be an integer 1..16, got '0'"),
    ([], {"PERF_REDIS": "3,1"}, "PERF_REDIS must be an integer 1..16, got '3,1'"),
    ([], {"PERF_GROUP_STEP": "true"}, "PERF_GROUP_STEP must be 0 or 1, got 'true'"),
    ([], {"PERF_ARCHIVE": "yes"}, "PERF_ARCHIVE must be 0 or 1, got 'yes'"),
    ([], {"PERF_SECONDS": "abc"}, "PERF_SECONDS must be a number > 0, got 'abc'"),
    ([], {"PERF_CONNECTIONS": "100"}, "PERF_CONNECTIONS must be 0 or an integer > 500 (the warm-up), got '100'"),
])
def test_bad_values_exit_2_naming_them(argv, env, message, monkeypatch, capsys):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert perf.main(argv) == 2
    assert capsys.readouterr().err == f"perf: {message}\n"


def test_help_works_whatever_the_environment_holds(monkeypatch, capsys):
    monkeypatch.setenv("PERF_SECONDS", "abc")
    with pytest.raises(SystemExit) as exit_:
        perf.main(["--help"])
    assert exit_.value.code == 0 and "--seconds" in capsys.readouterr().out


def test_good_values_convert_and_the_option_beats_the_variable():
    env = {"PERF_RATES": "25, 100", "PERF_SECONDS": "10", "PERF_GROUP_STEP": "1", "PERF_TOPOLOGY": "scaled",
           "PERF_SDK_CLIENTS": "", "PERF_CONNECTIONS": "0", "PERF_BROKERS": "3"}
    cfg = perf_args.options(["--seconds", "5"], env)
    assert cfg.rates == [25.0, 100.0] and cfg.seconds == 5.0 and cfg.hold_seconds == 180.0
    assert cfg.group_step is True and cfg.archive is False and cfg.topology == "scaled"
    assert cfg.sdk_clients is None and cfg.connections == 0 and cfg.pairs == 20 and cfg.brokers == 3
    assert perf_args.options([], {}).brokers == 1 and perf_args.options([], {}).redis == 1
    assert perf_args.options([], {"PERF_REDIS": "3"}).redis == 3


def test_the_cql_mailbox_runs_with_the_archive_tier_and_tells_the_stack(monkeypatch):
    """PERF_MAILBOX=cql: the archive tier is on (the store needs its cluster) and the
    stack's services inherit QIM_MAILBOX_STORE=cql; anything but redis|cql is refused."""
    # setenv first so the undo removes what options() sets below: a bare delenv of an unset
    # variable records nothing, and QIM_MAILBOX_STORE=cql leaked into every later stack
    monkeypatch.setenv("QIM_MAILBOX_STORE", "")
    monkeypatch.delenv("QIM_MAILBOX_STORE")
    assert perf_args.options([], {}).mailbox == "redis" and "QIM_MAILBOX_STORE" not in perf_args.os.environ
    cfg = perf_args.options([], {"PERF_MAILBOX": "cql"})
    assert cfg.archive and perf_args.os.environ["QIM_MAILBOX_STORE"] == "cql"
    with pytest.raises(perf_args.PerfArgError, match="PERF_MAILBOX must be redis or cql, got 'sql'"):
        perf_args.options([], {"PERF_MAILBOX": "sql"})
