"""Golden vectors (tests/vectors/*.json, built by gen_vectors.py without qim) against
both implementations: same results, same exact error class."""

from __future__ import annotations

import builtins
import json
import pathlib

import pytest

import qim.errors
from qim._core.types import MailboxEvent

from ._impls import IMPL_IDS, module

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors"


def _load(name: str):
    return json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))


def decode(value):
    if isinstance(value, dict):
        if "hex" in value:
            return bytes.fromhex(value["hex"])
        if "event" in value:
            return MailboxEvent(*[decode(v) for v in value["event"]])
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def encode(value):
    if isinstance(value, MailboxEvent):
        return {"event": [encode(v) for v in value]}
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def error_class(name: str) -> type[BaseException]:
    cls = getattr(qim.errors, name, None) or getattr(builtins, name)
    assert issubclass(cls, BaseException)
    return cls


def _cases(name: str, cases: list[dict]):
    return [
        pytest.param(impl, case, id=f"{impl}-{name}-{i}-{case['fn']}")
        for impl in IMPL_IDS
        for i, case in enumerate(cases)
    ]


ALL = []
for _name in ("ids", "mailbox_seq", "watermark", "eventgroup"):
    ALL += [(_name, p) for p in _cases(_name, _load(_name))]
ALL += [("frame", p) for p in _cases("frame", _load("frame")["cases"])]


def test_vector_files_are_substantial() -> None:
    counts = {name: sum(1 for n, _ in ALL if n == name) // len(IMPL_IDS)
              for name in ("ids", "mailbox_seq", "watermark", "eventgroup", "frame")}
    assert all(c >= 20 for c in counts.values()), counts
    assert any("error" in c for c in _load("ids")) and any("result" in c for c in _load("ids"))


@pytest.mark.parametrize(
    "modname,impl,case",
    [pytest.param(n, *p.values, id=p.id) for n, p in ALL],
)
def test_vector(modname: str, impl: str, case: dict) -> None:
    fn = getattr(module(modname, impl), case["fn"])
    args = decode(case["args"])
    if "error" in case:
        cls = error_class(case["error"])
        with pytest.raises(cls) as info:
            fn(*args)
        assert type(info.value) is cls, f"{type(info.value).__name__} is not {case['error']}"
    else:
        result = fn(*args)
        assert encode(result) == case["result"]
        if case["fn"] in ("unpack_event",):
            assert type(result) is MailboxEvent
        if case["fn"] in ("unpack_group", "decode", "encode_frame"):
            assert isinstance(result, list)


STREAMS = [pytest.param(impl, s, id=f"{impl}-stream-{i}")
           for impl in IMPL_IDS for i, s in enumerate(_load("frame")["streams"])]


@pytest.mark.parametrize("impl,stream", STREAMS)
@pytest.mark.parametrize("step", [None, 1, 7])
def test_frame_stream_vector(impl: str, stream: dict, step: int | None) -> None:
    frame = module("frame", impl)
    data = decode(stream["stream"])
    dec = frame.FrameDecoder()
    pieces = [data] if step is None else [data[i:i + step] for i in range(0, len(data), step)]
    got = []
    if "error" in stream:
        cls = error_class(stream["error"])
        with pytest.raises(cls) as info:
            for piece in pieces:
                got += dec.feed(piece)
        assert type(info.value) is cls
        with pytest.raises(cls):  # poisoned
            dec.feed(b"")
    else:
        for piece in pieces:
            got += dec.feed(piece)
        assert encode(got) == stream["frames"]
        assert dec.at_boundary() and dec.buffered == 0
