"""The reference bench of the regression gate (benches/gate.py, benches/floors.toml).

`struct.Struct.pack` of one mailbox-event-shaped record (four small ints, three 16-byte
ids, three u64, one u8) by the standard library's C `struct` module: the same kind of
work as the compiled codecs (Python ints checked and converted to C, bytes copied, one
bytes object allocated), done by code that is not ours and does not change with this
repository. A hot function is recorded as (its fastest round) / (this bench's fastest
round) in the same run, so a faster or slower machine, or a busier one, moves both.
"""

from __future__ import annotations

import struct

import pytest

RECORD = struct.Struct(">BBBI16s16s16sQQQB")
ARGS = (1, 1, 3, 1, b"\x01" * 16, b"\x02" * 16, b"\x03" * 16, 1234, 42, 1_717_000_000_000, 8)


@pytest.mark.benchmark(group="reference")
def test_reference_struct_pack(benchmark) -> None:
    assert len(benchmark(RECORD.pack, *ARGS)) == RECORD.size
