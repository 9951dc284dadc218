"""Compiled hot paths of QIM, chosen once at import (STYLE.md: msgpack/aiokafka).

`from qim._core import frame, mailbox_seq, watermark, eventgroup, ids, sendkey` gives the
compiled Cython modules, or their pure-Python twins in `qim._core._pure` when
`QIM_PUREPYTHON=1`. There is no silent fallback: a missing or broken compiled module
raises ImportError, so a broken wheel fails loudly.
"""

from __future__ import annotations

import importlib
import os
import sys

PURE = os.environ.get("QIM_PUREPYTHON", "") == "1"
_NAMES = ("frame", "mailbox_seq", "watermark", "eventgroup", "ids", "sendkey")
_base = "qim._core._pure" if PURE else "qim._core"

frame = importlib.import_module(f"{_base}.frame")
mailbox_seq = importlib.import_module(f"{_base}.mailbox_seq")
watermark = importlib.import_module(f"{_base}.watermark")
eventgroup = importlib.import_module(f"{_base}.eventgroup")
ids = importlib.import_module(f"{_base}.ids")
sendkey = importlib.import_module(f"{_base}.sendkey")  # after ids: it calls conversation_id_direct

COMPILED = not PURE

if PURE:
    # `import qim._core.frame` must give the twin too, never load the extension behind
    # the facade's back (that would silently mix implementations in one process).
    for _name in _NAMES:
        sys.modules[f"qim._core.{_name}"] = globals()[_name]

__all__ = ["frame", "mailbox_seq", "watermark", "eventgroup", "ids", "sendkey", "COMPILED", "PURE"]
