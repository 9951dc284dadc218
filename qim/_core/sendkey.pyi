"""SEND_MESSAGE's routing key from its wire bytes: the gateway's fast path of send_key
(the rule: qim/_core/_pure/sendkey.py)."""

from typing import Optional

def route_key(body: bytes, tenant: int, user_id: int, max_body: int) -> Optional[bytes]:
    """The conversation_id of a plain SEND_MESSAGE every gateway check accepts, else None
    (the caller runs the full path, which accepts or refuses with its own error). Raises
    only TypeError (a max_body not an int) and what ids.conversation_id_direct raises."""
