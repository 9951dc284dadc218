"""`qim-dev stack up` passes and records the OTEL_* variables of its environment (decision
0140's tracing) like the moderation settings: a later `qim-dev stack restart NAME` from a
shell without them starts the service from the recorded environment with tracing still
on (what a newcomer found: the restart dropped them), and a stack up with other OTEL_*
values restarts the stack, naming what changed without printing the OTLP headers (a
collector's credentials)."""

from __future__ import annotations

from qim.dev.stack_cli import policy_differs, policy_settings, restart_words
from tests.dev.test_stack_policy import Running

TRACED = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
          "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer a-collector-token"}


def test_otel_variables_set_in_the_environment_are_passed_and_recorded():
    got = policy_settings({**TRACED, "OTEL_SERVICE_NAME": "", "HOME": "/h", "QIM_REDIS_ADDR": "x"})
    assert got == TRACED  # set ones only; other variables are not settings


def test_other_tracing_settings_restart_the_stack_and_hide_the_headers():
    assert not policy_differs({**TRACED, "QIM_REDIS_ADDR": "x"}, dict(TRACED))
    assert policy_differs({}, TRACED)  # tracing asked for on a stack without it
    assert policy_differs(TRACED, {})  # tracing dropped: restarted without it
    wanted = {**TRACED, "OTEL_TRACES_EXPORTER": "console",
              "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer another-token"}
    line = restart_words(Running.stack(TRACED), {}, wanted)
    assert "other tracing settings (" in line and "OTEL_TRACES_EXPORTER otlp -> console" in line, line
    assert "OTEL_EXPORTER_OTLP_HEADERS changed" in line, line
    assert "a-collector-token" not in line and "another-token" not in line
    assert "moderation" not in line  # only what changed is named
