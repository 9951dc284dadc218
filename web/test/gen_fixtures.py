"""Write the fixtures qim-js checks against the server's own libraries (committed).

- test/zstd.json: zstd frames made by zstandard (as qim/_core/frame) for the bounded
  decompressor (web/test/zstd.test.ts). Cases: {"name", "frame": hex, "body": hex},
  {"name", "frame", "len"} or {"name", "frame": hex, "error": name}.
- test/proto.json: protobuf bodies serialised by the Python protobuf runtime from
  qim/proto/v1 with 64-bit values at 2^53 + 1 and 2^64 - 1 (web/test/proto.test.ts).

Run `../.venv/bin/python test/gen_fixtures.py` from web/.
"""

import json
import os

import zstandard

from qim.proto.v1 import connection_pb2, mailbox_pb2, session_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
BOUND = 4 * 1024 * 1024


U64 = (1 << 64) - 1
P53 = (1 << 53) + 1


def proto_cases():
    entry = mailbox_pb2.MailboxEntry(mailbox_seq=P53, event_type=1, sender_id=U64, conversation_seq=P53,
                                     created_at_ms=1717171717171, body="你好 👋".encode())
    auth = connection_pb2.AuthOk(user_id=U64, device_id=P53, tenant_id=bytes(16), mailbox_lane=63)
    mark = session_pb2.MarkRead(conversation_id=bytes(range(1, 17)), read_conversation_seq=U64, peer_user_id=P53)
    return [
        {"type": "MailboxEntry", "hex": entry.SerializeToString().hex(),
         "fields": {"mailboxSeq": str(P53), "senderId": str(U64), "conversationSeq": str(P53)}},
        {"type": "AuthOk", "hex": auth.SerializeToString().hex(),
         "fields": {"userId": str(U64), "deviceId": str(P53)}},
        {"type": "MarkRead", "hex": mark.SerializeToString().hex(),
         "fields": {"readConversationSeq": str(U64), "peerUserId": str(P53)}},
    ]


def main():
    sized = zstandard.ZstdCompressor(level=3)
    unsized = zstandard.ZstdCompressor(level=3, write_content_size=False)
    text = ("你好 👋 QIM " * 500).encode("utf-8")
    cases = [
        {"name": "sized text", "frame": sized.compress(text).hex(), "body": text.hex()},
        {"name": "unsized text", "frame": unsized.compress(text).hex(), "body": text.hex()},
        {"name": "empty", "frame": sized.compress(b"").hex(), "body": ""},
        {"name": "at the bound", "frame": sized.compress(bytes(BOUND)).hex(), "len": BOUND},
        {"name": "declared over the bound", "frame": sized.compress(bytes(BOUND + 1)).hex(),
         "error": "FrameTooLarge"},
        {"name": "unsized over the bound", "frame": unsized.compress(bytes(BOUND + 4096)).hex(),
         "error": "FrameTooLarge"},
        {"name": "truncated", "frame": sized.compress(text)[:-5].hex(), "error": "DecompressError"},
        {"name": "two frames", "frame": (sized.compress(text) + sized.compress(b"x")).hex(),
         "error": "DecompressError"},
        {"name": "not zstd", "frame": b"junk".hex(), "error": "DecompressError"},
    ]
    for name, data in [("zstd.json", cases), ("proto.json", proto_cases())]:
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    main()
