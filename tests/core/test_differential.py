"""Every public function of qim._core, compiled vs pure twin, on generated inputs.

SPECS names one argument strategy (tests/core/_strategies.py) per public function of
each module, valid and invalid inputs mixed. Both implementations must return equal
values of equal types, or raise the same exception class (a QimError also with the
same message).
test_specs_cover_every_public_name fails when a module (its stub, its pure twin or its
compiled build) gains a public function or FrameDecoder method without a spec here, so
differential coverage cannot fall behind the API. The per-module test files hold
further differential tests on hand-shaped inputs (corrupted streams, golden layouts).
"""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qim._core
from qim.errors import QimError

from . import _strategies as S
from ._impls import COMPILED, NAMES, PURE, PURE_MODE


def _decoder_trace(mod, max_frame, max_partial, pieces) -> list:
    """Construct a FrameDecoder, feed every piece; record each outcome and the state."""
    dec = mod.FrameDecoder(max_frame=max_frame, max_partial_frames=max_partial)
    trace: list = [(dec.buffered, dec.at_boundary())]
    for piece in pieces:
        trace.append(_outcome(dec.feed, piece))
        trace.append((dec.buffered, dec.at_boundary()))
    return trace


SPECS: dict[str, dict[str, st.SearchStrategy[tuple]]] = {
    "frame": {
        "encode_header": S.call_args(S.uint(0, 3, 1, 2), S.uint(0, 0xFFFF), S.uint(0, 0xFFFF),
                                     S.uint(0, 0xFFFFFFFF), S.uint(0, 65536)),
        "decode_header": st.one_of(
            S.call_args(S.encoded(S.good_header)),
            S.call_args(S.encoded(S.good_header.map(lambda h: b"\xa5" * 7 + h)),
                        S.uint(0, 7, 7))),
        "encode_frame": S.call_args(S.uint(0, 0xFFFF), S.uint(0, 0xFFFFFFFF), S.body,
                                    S.compress, S.uint(1, 65536, 7, 100)),
        "decompress_bounded": S.call_args(S.encoded(S.good_zstd), S.uint(0, 1 << 32, 0, 300, 900)),
        "FrameDecoder": S.decoder_args,
    },
    "mailbox_seq": {
        "compose": S.call_args(S.uint(1, 0x7FFF), S.uint(0, S.M48)),
        "split": S.call_args(S.seq_value),
        "is_valid": S.call_args(S.seq_value),
        "to_bytes": S.call_args(S.seq_value),
        "from_bytes": S.call_args(S.seq_bytes),
    },
    "watermark": {
        "empty": S.call_args(),
        "decode": S.call_args(S.blob),
        "encode": S.call_args(S.records_arg),
        "advance_all": S.call_args(S.blob, S.uint(0, S.M48, 1, 5, 40)),
        "start_offset": S.call_args(S.blob),
        "visible_offset": S.call_args(S.blob, S.uint(0, 63, 1)),
    },
    "eventgroup": {
        "pack_event": S.call_args(S.event_arg),
        "unpack_event": S.call_args(S.event_bytes),
        "pack_group": S.call_args(S.group_arg),
        "unpack_group": S.call_args(S.group_bytes),
        "pack_each": S.call_args(S.prefix_arg, S.event_arg, S.event_ids_arg),
    },
    "ids": {
        "conversation_id_direct": S.call_args(S.tenant, S.nz64, S.nz64),
        "conversation_id_group": S.call_args(S.tenant, S.nz64),
        "conversation_id_room": S.call_args(S.tenant, S.nz64),
        "conversation_kind": S.call_args(S.conv_id),
        "lane_id": S.call_args(S.tenant, S.nz64),
        "virtual_bucket": S.call_args(S.tenant, S.nz64),
        "mailbox_shard": S.call_args(S.tenant, S.nz64, S.shard_count),
        "user_placement": S.call_args(S.tenant, S.nz64, S.shard_count),
        "commit_bucket": S.call_args(S.tenant, S.conv_id),
        "dispatch_id": S.call_args(S.message_id, S.uint(0, 0xFFFFFFFF, 1)),
        "event_id": S.call_args(S.message_id, S.nz64, S.uint(1, 255)),
        "client_message_id": S.call_args(S.message_id, S.nz64, S.uint(0, S.U64, 1)),
        "endpoint_scope": S.call_args(S.endpoint),
        "compose_message_id": S.call_args(S.uint(0, S.M48), S.uint(0, 0xFFFF), S.uint(0, 0xFFFF),
                                          S.uint(0, 0xFFFF)),
        "split_message_id": S.call_args(S.message_id),
    },
    "sendkey": {
        "route_key": S.send_args,
    },
}
# public members of the one public class; feed, buffered and at_boundary are all
# observed after every step of _decoder_trace
CLASS_MEMBERS = {("frame", "FrameDecoder"): {"feed", "buffered", "at_boundary"}}
CASES = [(mod, fn) for mod in NAMES for fn in SPECS[mod]]


def _outcome(fn, *args) -> tuple:
    try:
        value = fn(*args)
    except QimError as e:  # our own errors: the twins word them identically
        return ("error", type(e), str(e))
    except Exception as e:  # noqa: BLE001 - TypeError & co: compared by class
        return ("error", type(e))
    return ("ok", type(value), repr(value))


def _public(module) -> set[str]:
    """Public callables the module itself defines (imports such as errors excluded)."""
    return {n for n, v in vars(module).items() if not n.startswith("_") and callable(v)
            and getattr(v, "__module__", None) == module.__name__}


def _impls(name: str) -> list:
    """The implementations of qim._core.<name> this run has (no compiled one when pure)."""
    return [PURE[name]] + ([] if PURE_MODE else [COMPILED[name]])


def test_specs_cover_every_public_name() -> None:
    here = pathlib.Path(qim._core.__file__).parent
    for name in NAMES:
        stub = (here / f"{name}.pyi").read_text(encoding="utf-8")
        names = set(re.findall(r"^(?:def|class) (\w+)", stub, re.M))
        for mod in _impls(name):
            names |= _public(mod)
        assert names == set(SPECS[name]), (name, names ^ set(SPECS[name]))
    for (name, cls), members in CLASS_MEMBERS.items():
        for mod in _impls(name):
            public = {m for m in dir(getattr(mod, cls)) if not m.startswith("_")}
            assert public == members, (mod.__name__, cls, public ^ members)


@pytest.mark.differential
@pytest.mark.parametrize("module,function", CASES, ids=[f"{m}.{f}" for m, f in CASES])
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_twins_agree(module: str, function: str, data: st.DataObject) -> None:
    args = data.draw(SPECS[module][function], label="args")
    if (module, function) == ("frame", "FrameDecoder"):
        pure, compiled = (_outcome(_decoder_trace, m, *args)
                          for m in (PURE["frame"], COMPILED["frame"]))
    else:
        pure = _outcome(getattr(PURE[module], function), *args)
        compiled = _outcome(getattr(COMPILED[module], function), *args)
    assert pure == compiled
