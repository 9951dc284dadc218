"""Write test/zstd.json: zstd frames made by the server's own library (zstandard, as in
qim/_core/frame) for the bounded decompressor of qim-js (web/test/zstd.test.ts).

Run `../.venv/bin/python test/gen_zstd.py` from web/ (the file is committed).
Cases: {"name", "frame": hex, "body": hex} or {"name", "frame": hex, "error": name}.
"""

import json
import os

import zstandard

HERE = os.path.dirname(os.path.abspath(__file__))
BOUND = 4 * 1024 * 1024


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
    with open(os.path.join(HERE, "zstd.json"), "w", encoding="utf-8") as fh:
        json.dump(cases, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
