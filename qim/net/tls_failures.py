"""Why a TLS handshake failed, in a few bounded words (qim/net/tls.py re-exports these):
`handshake_failure` labels qim_tls_handshake_failures_total{reason}, `describe` gives the
one line for logs and client errors, `HandshakeFailed` is what a client's connect raises."""

from __future__ import annotations

import asyncio
import ssl


class HandshakeFailed(ConnectionError):
    """The TCP connection was made but the TLS handshake failed. `reason` is the bounded
    label of `handshake_failure`, `permanent` is True when trying again cannot help (the
    server's certificate is not trusted, TLS 1.3 refused); the cause is chained."""

    def __init__(self, exc: BaseException) -> None:
        self.detail = describe(exc)
        super().__init__(f"TLS handshake failed: {self.detail}")
        self.reason = handshake_failure(exc)
        self.permanent = self.reason in ("certificate", "version")


# OpenSSL reasons -> a small set of label values (qim_tls_handshake_failures_total{reason})
_REASONS = {
    "plaintext": ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "UNKNOWN_PROTOCOL",
                  "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"),
    "version": ("UNSUPPORTED_PROTOCOL", "TLSV1_ALERT_PROTOCOL_VERSION", "NO_PROTOCOLS_AVAILABLE",
                "VERSION_TOO_LOW", "VERSION_TOO_HIGH"),
    "certificate": ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_VERIFY_FAILED", "CERTIFICATE_REQUIRED",
                    "TLSV13_ALERT_CERTIFICATE_REQUIRED", "SSLV3_ALERT_BAD_CERTIFICATE", "TLSV1_ALERT_UNKNOWN_CA",
                    "SSLV3_ALERT_CERTIFICATE_UNKNOWN", "NO_CERTIFICATE_RETURNED"),
}


def handshake_failure(exc: BaseException) -> str:
    """A bounded reason for a failed handshake: plaintext, version, certificate, timeout,
    closed (the peer went away) or other."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or "taking longer" in str(exc):
        return "timeout"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "certificate"
    reason = getattr(exc, "reason", None) or ""
    for label, names in _REASONS.items():
        if reason in names:
            return label
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError)):
        return "closed"
    return "other"


def describe(exc: BaseException) -> str:
    """One short line about a TLS failure for logs and client errors (no secrets: the
    OpenSSL reason or the exception class)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message}"
    reason = getattr(exc, "reason", None)
    return reason.lower().replace("_", " ") if reason else type(exc).__name__
