"""Fixtures of the tracing tests: the local OTLP receiver and a private stack (two
gateways) exporting to it at sampling ratio 1.0 (docs/decisions/0140)."""

from __future__ import annotations

import pytest

from tests.fixtures import running_stack
from tests.otel.receiver import OtlpReceiver


@pytest.fixture(scope="module")
def otlp_receiver():
    """An OtlpReceiver on loopback, stopped after the module."""
    rx = OtlpReceiver().start()
    yield rx
    rx.stop()


@pytest.fixture(scope="module")
def traced_stack(otlp_receiver, tmp_path_factory):
    """Private engines and services, two gateways, every service tracing to `otlp_receiver`
    (parent-based ratio 1.0, exports every 200 ms)."""
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.endpoint,
           "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.0",
           "OTEL_BSP_SCHEDULE_DELAY": "200"}
    with running_stack(tmp_path_factory.mktemp("otel"), nodes={"gateway": 2}, extra_env=env) as st:
        yield st
