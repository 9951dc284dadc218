"""A JPEG's metadata removed without encoding it again (docs/decisions/0138: the rule of
what is stripped is unchanged, only the means; qim/services/media/inspect.py decides).

Saving a photo again through Pillow strips its metadata but re-encodes it: the stored file
differed from the one chosen and often read larger (a newcomer saw a 180 KB photo stored
as 230 KB). For an upright JPEG (EXIF orientation 1 or none) the metadata lives in
segments of its own, so they are dropped byte for byte and the image data is kept as
sent: the pixels are the same and the file is never larger.

Dropped: APP1 (EXIF, XMP), APP2 (ICC, MPF), APP3-APP13, APP15 and COM segments wherever
they stand (also between the scans of a progressive JPEG), and everything after the
end-of-image marker (cameras append preview images there, which carry their own EXIF).
Kept: APP0 (JFIF) and APP14 (Adobe: it says how to convert the colours), the tables, the
frame and every scan. A file whose structure is not that of a JPEG (`strip_jpeg` returns
None) is left to the re-encoding path, and the caller checks the pixels of the result.
"""

from __future__ import annotations

from typing import Optional

SOI, EOI, SOS = 0xD8, 0xD9, 0xDA
APP0, APP14 = 0xE0, 0xEE
# metadata segments: APP1..APP15 but APP14, and COM
DROPPED = frozenset(range(0xE1, 0xF0)) - {APP14} | {0xFE}


def strip_jpeg(data: bytes) -> Optional[bytes]:
    """`data` (a JPEG file) without its metadata segments and trailing bytes (module doc),
    or None when its markers do not walk to an end-of-image: a truncated file, a marker
    where a segment is due, a segment longer than the file. Never raises on bad bytes."""
    n = len(data)
    if n < 4 or data[0] != 0xFF or data[1] != SOI:
        return None
    out = [data[:2]]
    i = 2
    while True:
        if i + 2 > n or data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # a fill byte before a marker
            i += 1
            continue
        if marker == EOI:
            out.append(data[i:i + 2])
            return b"".join(out)
        if marker in (SOI, 0x00, 0x01) or 0xD0 <= marker <= 0xD7:  # never a segment here
            return None
        if i + 4 > n:
            return None
        end = i + 2 + int.from_bytes(data[i + 2:i + 4], "big")
        if end > n or end < i + 4:
            return None
        if marker not in DROPPED:
            out.append(data[i:end])
        i = end
        if marker == SOS:  # the entropy-coded data runs to the next marker but RSTn
            scan_end = _scan_end(data, i)
            if scan_end < 0:
                return None
            out.append(data[i:scan_end])
            i = scan_end


def _scan_end(data: bytes, i: int) -> int:
    """The offset of the marker that ends the entropy-coded data starting at `i`: the
    first 0xFF not followed by 0x00 (a stuffed byte) or RST0-7 (fill bytes before the
    marker are left to the caller); -1 if the data ends first."""
    n = len(data)
    while True:
        i = data.find(b"\xff", i)
        if i < 0 or i + 1 >= n:
            return -1
        follower = data[i + 1]
        if follower == 0x00 or 0xD0 <= follower <= 0xD7:
            i += 2
            continue
        return i
