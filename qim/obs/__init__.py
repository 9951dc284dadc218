"""Observability and the service shell: ServiceNode (node.py), per-node metrics
(metrics.py), /metrics and /healthz (http.py)."""
