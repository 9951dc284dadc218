"""Development tokens for AUTH (docs/protocol.md "Auth.token").

The definition lives in qim/wire/devtoken.py (one definition for the gateway, which
verifies, and for qimctl, qim-loadgen, qim-desktop and the SDK examples, which issue);
the names stay importable from here for existing callers.
"""

from __future__ import annotations

from qim.wire.devtoken import PREFIX, issue_dev_token, token_claims, verify_dev_token

__all__ = ["PREFIX", "issue_dev_token", "token_claims", "verify_dev_token"]
