"""The gate of `make bench` (benches/gate.py, benches/report.py) on crafted results."""

from __future__ import annotations

import json

import pytest

from benches import gate, report

GROUPS = ("frame_stream", "watermark", "eventgroup")


def _doc(ratio: dict[str, float], compiled_s: float = 1e-6, ref_s: float = 1e-6) -> dict:
    benches = [{"group": "reference", "name": "test_reference_struct_pack", "params": None,
                "stats": {"min": ref_s}}]
    for group in GROUPS:
        for impl, t in (("pure", compiled_s * ratio[group]), ("compiled", compiled_s)):
            benches.append({"group": group, "name": f"test_{group}[{impl}]", "params": {"impl": impl},
                            "stats": {"min": t}})
    return {"benchmarks": benches}


def _files(tmp_path, monkeypatch, baseline: dict) -> None:
    floors = tmp_path / "floors.toml"
    floors.write_text("[floors]\nframe_stream = 10\nwatermark = 10\neventgroup = 10\n"
                      "[regression]\nmargin = 0.5\nmin_ratio = 2.0\n")
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps({"ratios": baseline}))
    monkeypatch.setattr(report, "load_floors", lambda: gate.load_floors(floors))
    monkeypatch.setattr(report, "load_baseline", lambda: gate.load_baseline(base))


def _run(tmp_path, doc: dict) -> int:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(doc))
    return report.main(str(path))


def test_a_ratio_below_its_floor_fails_naming_the_figure(tmp_path, monkeypatch, capsys) -> None:
    _files(tmp_path, monkeypatch, {})
    assert _run(tmp_path, _doc({"frame_stream": 14, "watermark": 20, "eventgroup": 8.9})) == 1
    out, err = capsys.readouterr()
    assert "eventgroup_x=8.9 below its floor 10x" in err
    assert out.strip().splitlines()[-1] == "bench: frame_stream_x=14.0 watermark_x=20.0 eventgroup_x=8.9"


def test_ratios_at_their_floors_and_a_steady_baseline_pass(tmp_path, monkeypatch, capsys) -> None:
    _files(tmp_path, monkeypatch, {f"{g}/test_{g}": 2.0 for g in GROUPS})
    assert _run(tmp_path, _doc({"frame_stream": 10, "watermark": 10, "eventgroup": 10}, compiled_s=2e-6)) == 0
    assert "FAILED" not in capsys.readouterr().err


def test_a_hot_function_slower_than_its_margin_fails(tmp_path, monkeypatch, capsys) -> None:
    _files(tmp_path, monkeypatch, {f"{g}/test_{g}": 2.0 for g in GROUPS})
    # the compiled benches take 3.2x the reference's time; the baseline says 2.0x (+60 % > 50 %)
    assert _run(tmp_path, _doc({g: 12 for g in GROUPS}, compiled_s=3.2e-6)) == 1
    err = capsys.readouterr().err
    assert "eventgroup/test_eventgroup regressed: 3.20x the reference, baseline 2.00x" in err


def test_calls_shorter_than_min_ratio_are_not_judged_for_regression(tmp_path, monkeypatch) -> None:
    _files(tmp_path, monkeypatch, {f"{g}/test_{g}": 1.0 for g in GROUPS})  # below min_ratio 2.0
    assert _run(tmp_path, _doc({g: 12 for g in GROUPS}, compiled_s=1.9e-6)) == 0


def test_a_faster_machine_moves_both_and_passes(tmp_path, monkeypatch) -> None:
    _files(tmp_path, monkeypatch, {f"{g}/test_{g}": 2.0 for g in GROUPS})
    assert _run(tmp_path, _doc({g: 12 for g in GROUPS}, compiled_s=6e-7, ref_s=3e-7)) == 0


def test_no_reference_or_no_floors_file_is_an_error(tmp_path) -> None:
    doc = _doc({g: 12 for g in GROUPS})
    doc["benchmarks"] = doc["benchmarks"][1:]
    with pytest.raises(gate.GateError, match="reference"):
        gate.hot_ratios(doc)
    with pytest.raises(gate.GateError, match="nope.toml"):
        gate.load_floors(tmp_path / "nope.toml")


def test_the_committed_files_cover_the_headline_groups() -> None:
    floors, margin, min_ratio = gate.load_floors()
    assert all(floors[g] >= 10 for g in GROUPS) and 0 < margin < 1 and min_ratio > 0
    base = gate.load_baseline()
    assert any(k.startswith("eventgroup/") for k in base) and all(v > 0 for v in base.values())
