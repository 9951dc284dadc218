"""OpenTelemetry traces (docs/decisions/0140): the local OTLP receiver of conftest.py and
the stack with tracing on."""
