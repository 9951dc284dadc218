"""Observability: /metrics and /healthz for every service (DESIGN.md §2)."""
