"""The TLS side of a ServiceNode (qim/obs/node.py; docs/decisions/0020-service-shell.md,
docs/decisions/0022): the contexts of its listeners and clients, rebuilt from their files
on SIGHUP (`reload_tls`, counted in `qim_tls_reloads_total{result}`, the load time in
`qim_tls_loaded_timestamp_seconds{what}`); a refused handshake of any listener (the
LinkServer of qim/net/link_server.py does them) counted in
`qim_tls_handshake_failures_total{listener, reason}` and logged at most once a second per
listener (TLS_LOG_EVERY_S); and the allow-list check of internal RPC
(qim/net/allow.py, refusals in `qim_rpc_refused_total{opcode, peer_service}`).

NodeTls is a base of ServiceNode: `_init_tls()` makes its metrics on the node's
MetricSet (`metrics_base`) and it logs on the node's logger (`log`).
"""

from __future__ import annotations

import logging
import time
from typing import Optional

from qim.errors import ConfigError, TlsError
from qim.net.allow import RpcGuard
from qim.net.tls import Alpn, TlsContexts, TlsFiles
from qim.obs.metrics import MetricSet

TLS_LOG_EVERY_S = 1.0  # failed handshakes are logged at most once a second per listener (each is counted)


class NodeTls:
    """TLS contexts, their reload, handshakes and the RPC allow-list guard of a node
    (module doc)."""

    service: str
    metrics_base: MetricSet
    log: logging.Logger

    def _init_tls(self) -> None:
        self._tls_failures = self.metrics_base.counter(
            "qim_tls_handshake_failures", "Connections refused during or right after the TLS handshake",
            ["listener", "reason"])
        self._rpc_refused = self.metrics_base.counter(
            "qim_rpc_refused", "Internal frames refused by the per-opcode allow-list", ["opcode", "peer_service"])
        self._tls_reloads = self.metrics_base.counter("qim_tls_reloads", "Certificate reloads (SIGHUP)", ["result"])
        self._tls_loaded = self.metrics_base.gauge(
            "qim_tls_loaded_timestamp_seconds", "When the certificates in use were loaded", ["what"])
        self._tls_sets: list[tuple[str, TlsContexts]] = []
        self._tls_logged: dict[str, tuple[float, int]] = {}  # listener -> (last line, failures since)

    def tls_contexts(self, files: Optional[TlsFiles], what: str, variables: str,
                     alpn: Alpn = None) -> Optional[TlsContexts]:
        """Contexts for `files` (None stays None: plaintext development), reloaded by
        `reload_tls()`. ConfigError naming `variables` when a file cannot be loaded."""
        if files is None:
            return None
        try:
            contexts = TlsContexts(files, alpn=alpn)
        except TlsError as exc:
            raise ConfigError(f"{variables}: {exc}") from None
        self._tls_sets.append((what, contexts))
        self._tls_loaded.labels(what=what).set(contexts.loaded_at)
        return contexts

    def reload_tls(self) -> bool:
        """Rebuild every TLS context from its files (SIGHUP): new connections use the new
        certificates, established ones keep theirs. A file that fails to load keeps the
        contexts in use, is logged and counted (result="failed"); returns False then."""
        ok = True
        for what, contexts in self._tls_sets:
            try:
                contexts.reload()
            except TlsError as exc:
                ok = False
                self._tls_reloads.labels(result="failed").inc()
                self.log.error("TLS reload of %s failed, the certificate in use stays: %s", what, exc)
                continue
            self._tls_reloads.labels(result="ok").inc()
            self._tls_loaded.labels(what=what).set(contexts.loaded_at)
            self.log.info("TLS certificates of %s reloaded from %s", what, contexts.files.cert)
        return ok

    def rpc_guard(self, enforce: bool) -> RpcGuard:
        """The allow-list check of this node's internal listeners (qim/net/allow.py),
        counting refusals; `enforce=False` for plaintext development (no identity)."""
        return RpcGuard(enforce, lambda op, peer: self._rpc_refused.labels(opcode=op, peer_service=peer).inc(),
                        listener=self.service)

    def tls_refused(self, listener: str, reason: str, peer: str, detail: str) -> None:
        """Count a refused TLS handshake in qim_tls_handshake_failures_total{listener,reason}
        and log it at most once a TLS_LOG_EVERY_S per listener (the lines skipped counted)."""
        self._tls_failures.labels(listener=listener, reason=reason).inc()
        now = time.monotonic()
        last, since = self._tls_logged.get(listener, (0.0, 0))
        if now - last < TLS_LOG_EVERY_S:
            self._tls_logged[listener] = (last, since + 1)
            return
        more = f" ({since} more since the last line)" if since else ""
        self.log.info("%s listener refused %s: %s (%s)%s", listener, peer, reason, detail, more)
        self._tls_logged[listener] = (now, 0)
