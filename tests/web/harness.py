"""Browser test harness: Debian's Chromium driven by Playwright, the web
client served by qim-web from web/dist, talking to the session stack's gateway over
WebSocket, and a Python SDK peer in a thread of its own. The checks read what the page
shows (DOM text, data-* attributes the page sets from qim-js events) and what the SDK
peer is told; none of them reuses the page's code.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from pathlib import Path
from typing import Any, Optional

from qim.sdk import Client, MessagesAdded, MessagesUpdated
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import sdk_transport

CHROMIUM = "/usr/bin/chromium"
# Known to work here with Debian's Chromium (docs/operations.md "Web client"): without the
# background-networking flags Chromium keeps dialling hosts this closed network refuses.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DIST = Path(__file__).resolve().parents[2] / "web" / "dist"
SHOTS = Path(os.environ.get("QIM_WEB_SHOTS") or Path(__file__).resolve().parents[2] / "web" / "test-results")
TIMEOUT_MS = 30_000


def new_user() -> int:
    """A user id no other test uses (random 40-bit)."""
    return secrets.randbelow(1 << 40) + 1


class WebPage:
    """One signed-in tab: a Playwright page of the web client."""

    def __init__(self, page: Any, user: int) -> None:
        self.page, self.user = page, user
        self.sockets: list[str] = []  # every WebSocket the page opened (reconnects counted)
        self.console: list[str] = []  # the page's console lines: told when a wait fails
        page.on("websocket", lambda ws: self.sockets.append(ws.url))
        page.on("console", lambda msg: self.console.append(f"{msg.type}: {msg.text}"[:300]))

    def sign_in(self, base_url: str, name: str = "", device: Optional[int] = None) -> "WebPage":
        """Open the page and sign in as `self.user`; waits for the connection to be ready."""
        self.page.goto(base_url)
        self.page.fill("[data-testid=login-user]", str(self.user))
        self.page.fill("[data-testid=login-name]", name)
        if device is not None:
            self.page.fill("[data-testid=login-device]", str(device))
        self.page.click("[data-testid=login-submit]")
        self.wait_state("ready")
        return self

    def wait_state(self, state: str, timeout: int = TIMEOUT_MS) -> None:
        """Wait until the connection pill shows `state`; AssertionError naming the state
        shown, the sockets opened and the page's last console lines when it does not."""
        try:
            self.page.wait_for_selector(f"[data-testid=conn-state][data-state={state}]", timeout=timeout)
        except Exception as exc:  # Playwright's TimeoutError: say what the page showed instead
            if "Timeout" not in type(exc).__name__:
                raise
            shown = self.state()
            self.shot(f"wait-{state}-{self.user}")
            error = self.page.text_content("[data-testid=error]") or ""  # kept after the box hides
            login_shown = not self.page.is_hidden("#login")
            raise AssertionError(f"page of user {self.user} never showed {state!r} within {timeout} ms: it shows "
                                 f"{shown!r}; login form {'shown' if login_shown else 'hidden'}; last error "
                                 f"{error!r}; {len(self.sockets)} socket(s) opened; console: "
                                 + " | ".join(self.console[-20:])) from None

    def wait_true(self, js: str, what: str, timeout: int = TIMEOUT_MS) -> None:
        """Wait until the page's `js` (a function of no arguments) is true; AssertionError
        naming `what`, the list the page shows (unread, last message of each row), the
        connection state, the sockets and the last console lines when it is not (a CI
        failure of 2026-12-07 told only Playwright's "Timeout 30000ms exceeded")."""
        try:
            self.page.wait_for_function(js, timeout=timeout)
        except Exception as exc:
            if "Timeout" not in type(exc).__name__:
                raise
            self.shot(f"wait-{self.user}")
            shown = self.page.eval_on_selector_all("[data-testid=conversation]", """els => els.map(e =>
                `unread=${e.dataset.unread} last=${e.querySelector('[data-testid=last-message]')?.textContent}`)""")
            raise AssertionError(f"page of user {self.user} never showed {what} within {timeout} ms: list {shown}; "
                                 f"state {self.state()!r}; {len(self.sockets)} socket(s) opened; console: "
                                 + " | ".join(self.console[-20:])) from None

    def state(self) -> str:
        """The connection state the page shows."""
        return self.page.get_attribute("[data-testid=conn-state]", "data-state") or ""

    def open_chat(self, peer: int) -> None:
        """Open the direct conversation with `peer` from the new-chat box."""
        self.page.fill("[data-testid=new-chat-peer]", str(peer))
        self.page.click("[data-testid=new-chat-open]")
        self.page.wait_for_selector("[data-testid=chat]:not([hidden])", timeout=TIMEOUT_MS)

    def open_conversation(self, index: int = 0) -> None:
        """Click the conversation at `index` of the list."""
        self.page.locator("[data-testid=conversation]").nth(index).click()

    def send(self, text: str) -> None:
        """Type `text` into the composer and press Send."""
        self.page.fill("[data-testid=composer-text]", text)
        self.page.click("[data-testid=composer-send]")

    def rows(self) -> list[dict]:
        """The open conversation's rows: key, state, seq, text (as shown)."""
        return self.page.eval_on_selector_all("[data-testid=message]", """els => els.map(e => ({
            key: e.dataset.key, state: e.dataset.state, seq: e.dataset.seq,
            text: e.querySelector('[data-testid=message-text]').textContent}))""")

    def wait_rows(self, predicate_js: str, timeout: int = TIMEOUT_MS) -> None:
        """Wait until `predicate_js(rows)` (a JS arrow over the rows above) is true."""
        self.page.wait_for_function("""pred => {
            const rows = [...document.querySelectorAll('[data-testid=message]')].map(e => ({
              key: e.dataset.key, state: e.dataset.state, seq: e.dataset.seq,
              text: e.querySelector('[data-testid=message-text]').textContent}));
            return eval(pred)(rows);
        }""", arg=predicate_js, timeout=timeout)

    def unread(self) -> list[int]:
        """The unread count each listed conversation shows (data-unread)."""
        return [int(x) for x in self.page.eval_on_selector_all(
            "[data-testid=conversation]", "els => els.map(e => e.dataset.unread)")]

    def shot(self, name: str) -> Path:
        """Save a screenshot under SHOTS."""
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.page.screenshot(path=str(path))
        return path


class SdkPeer:
    """A Python SDK client on a loop thread of its own (the Playwright API is sync)."""

    def __init__(self, stack: Any, data_dir: Path, user: int) -> None:
        self.user = user
        self.told: list[Any] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"sdk-{user}", daemon=True)
        self.thread.start()
        token = issue_dev_token(stack.token_key, 0, user, 1)
        self.client: Client = self.run(Client.open(stack.gateway_addr, token, data_dir=str(data_dir), event_queue=False,
                                                   on_event=self.told.append, **sdk_transport(stack)))
        self.run(self.client.connect())

    def run(self, coro: Any, timeout: float = 60) -> Any:
        """Run a coroutine on the peer's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def bodies(self, conv: bytes) -> list[bytes]:
        """Bodies of the conversation's messages in the peer's store, in seq order."""
        return [m.body for m in self.run(self.client.messages(conv))]

    def recalled(self) -> set[bytes]:
        """message_ids the peer was told are recalled."""
        return {m.message_id for e in self.told if isinstance(e, (MessagesAdded, MessagesUpdated))
                for m in e.messages if m.state == 1}

    def close(self) -> None:
        """Close the client and stop the loop."""
        self.run(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
