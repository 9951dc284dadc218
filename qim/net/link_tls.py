"""The TLS side of a ClientLink (qim/net/link.py): TLS 1.3, server side, done with
`ssl.SSLObject` over two `MemoryBIO`s instead of the loop's TLS layer
(docs/decisions/0050-conn-lean-client-links.md).

`LinkTls` is the base of ClientLink and holds, in `__slots__`, the connection's state
the TLS side needs (the link adds its reader's and writer's: an idle connection stays a
single small object without a `__dict__`). It drives the
handshake (a refusal and a handshake slower than the listener's timeout reach
`listener.link_refused`, a finished one `listener.link_ready`), decrypts what arrives
into one buffer of the process (`_PLAIN`) and hands the bytes to the link's reader
side, and closes with close_notify after what was written, reading and dropping what
the peer still sends until its own close_notify (the last frames are not destroyed by a
reset).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, Optional, Protocol, cast

_PLAIN = memoryview(bytearray(64 * 1024))  # what the TLS layer decrypts into

HANDSHAKE, OPEN, CLOSING, CLOSED = range(4)


class LinkListener(Protocol):
    """What a listener gives its links (qim/net/link.py ClientLink, `link` below): the
    server context of the moment (None: plaintext), the write-buffer limit, the
    handshake timeout, and the two outcomes."""

    chunk_bytes: int
    handshake_timeout: float

    def context(self) -> Optional[ssl.SSLContext]:
        """The TLS server context for a new connection (None: plaintext development)."""
        ...

    def link_ready(self, link: Any) -> None:
        """The handshake finished (at once on plaintext): serve the link."""
        ...

    def link_refused(self, link: Any, exc: BaseException) -> None:
        """The handshake failed or timed out (`exc`); the link is closing."""
        ...


class LinkTls:
    """The handshake, decryption and TLS shutdown of a ClientLink (module doc); the
    state lives in the link's slots."""

    __slots__ = ("_listener", "_raw", "_tls", "_in", "_out", "_state", "_timer", "_eof", "_lost", "_draining")

    _listener: LinkListener
    _raw: Optional[asyncio.Transport]
    _tls: Optional[ssl.SSLObject]
    _in: Optional[ssl.MemoryBIO]
    _out: Optional[ssl.MemoryBIO]
    _state: int
    _timer: Optional[asyncio.TimerHandle]
    _eof: bool
    _lost: Optional[str]
    _draining: bool

    # the link's reader and writer sides (qim/net/link.py)
    def _deliver(self, data: bytes) -> None:
        raise NotImplementedError

    def _wake_reader(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        """Close at once (ClientLink.abort)."""
        raise NotImplementedError

    def _handshake(self) -> None:
        tls = self._tls
        assert tls is not None
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except (ssl.SSLError, OSError) as exc:
            self._flush()  # the alert that tells the peer why
            self._refuse(exc)
            return
        self._cancel_timer()
        self._state = OPEN
        self._flush()
        self._decrypt()  # the client may send its first frame right behind its Finished
        if self._state == OPEN:
            self._listener.link_ready(self)

    def _decrypt(self) -> None:
        tls, incoming = self._tls, self._in
        assert tls is not None and incoming is not None
        while incoming.pending or tls.pending():
            try:
                n = cast(int, tls.read(len(_PLAIN), _PLAIN))  # with a buffer: the byte count
            except ssl.SSLWantReadError:
                break  # a partial record: the rest comes with the next read
            except ssl.SSLZeroReturnError:  # close_notify: the peer is done sending
                self._eof = True
                self._wake_reader()
                break
            except ssl.SSLError as exc:
                self._lost = f"TLS error: {exc.reason or type(exc).__name__}"
                self.abort()
                return
            if not n:  # CPython's SSLObject.read answers a received close_notify with 0, not an error
                self._eof = True
                self._wake_reader()
                break
            self._deliver(bytes(_PLAIN[:n]))
        self._flush()  # what reading made OpenSSL answer (a KeyUpdate)

    def _flush(self) -> None:
        data = self._out.read() if self._out is not None else b""
        if data and self._raw is not None and not self._raw.is_closing():
            self._raw.write(data)

    def _shutdown(self) -> None:
        """Our close_notify, then the peer's (read meanwhile), then the TCP close."""
        tls = self._tls
        assert tls is not None
        try:
            tls.unwrap()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except ssl.SSLError:
            # the peer is still sending (application data after our close_notify): what
            # it sends is dropped until its EOF or the shutdown timer, so that our last
            # bytes (a WebSocket close frame, an ERROR) are not destroyed by the reset a
            # close with unread input makes
            self._flush()
            self._draining = True
            return
        except OSError:
            pass  # the connection ends here
        self._flush()
        if self._raw is not None:
            self._raw.close()

    def _too_slow(self) -> None:
        self._timer = None
        self._refuse(asyncio.TimeoutError("TLS handshake took longer than the timeout"))

    def _refuse(self, exc: BaseException) -> None:
        if self._state != HANDSHAKE:
            return
        self._state = CLOSING  # refused once
        self._cancel_timer()
        self._listener.link_refused(self, exc)
        if self._raw is not None:
            if isinstance(exc, asyncio.TimeoutError):
                self._raw.abort()
            else:
                self._raw.close()  # after the alert

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
