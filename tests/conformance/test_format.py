"""The conformance suite's own checks (docs/decisions/0107): every scenario file keeps
the format (script.py), docs/sdk.md lists exactly the known differences the files name,
and the player fails a scenario the SDK does not follow (the suite can fail)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from tests.conformance import script
from tests.conformance.test_conformance import play

SDK_MD = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


@pytest.mark.parametrize("path", script.paths(), ids=lambda p: p.stem)
def test_every_scenario_keeps_the_format(path: Path) -> None:
    sc = script.load(path)
    assert sc["steps"], path


def test_a_step_for_one_sdk_must_name_a_listed_difference(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "bad", "about": "x", "steps": [{"quiet": ["AUTH"], "ms": 1, "sdk": "js"}]}')
    with pytest.raises(script.ScenarioError, match="differs"):
        script.load(bad)


def test_docs_list_exactly_the_known_differences() -> None:
    """docs/sdk.md "Known differences" has one row `| scenario | id | sdk | ... |` per difference."""
    text = SDK_MD.read_text()
    section = text.split("### Known differences", 1)[1].split("\n#", 1)[0]
    rows = sorted(tuple(c.strip(" `") for c in line.strip("|").split("|")[:3])
                  for line in section.splitlines() if re.match(r"\| `", line))
    assert rows == [(s, k, sdk) for s, k, sdk, _ in script.known_differences()]


async def test_the_player_fails_what_the_sdk_does_not_do(tmp_path) -> None:
    """A negative control: connect.json with the first pull expected from cursor 5 fails
    at that step (the SDK pulls from 0), naming it."""
    sc = copy.deepcopy(script.load(script.SCENARIOS / "connect.json"))
    sc["steps"][3]["fields"]["cursor"] = 5
    with pytest.raises(AssertionError, match=r"connect step 3 .*cursor is 0"):
        await play(sc, tmp_path)
