"""The conformance suite's scenario format (docs/decisions/0107; docs/sdk.md
"Conformance suite"): reading and checking one scenario file of
tests/conformance/scenarios/ before either runner plays it.

A scenario is a JSON object: `name` (the file's stem), `about` (the rule it checks, with
the design section or decision it comes from; the runners' identity is user 1001,
device 1, tenant 0), optional `auto` (op -> reply the
player gives by itself), optional `differences` (id -> {"sdk", "why"}: a known
difference, listed in docs/sdk.md) and `steps`. A step's FIRST key is its kind:

server (the player): recv, reply, push, quiet, drop;
app (the runners): app (an action: connect, open_direct, send_text, leave_group,
join_room), tell (the app must be told an event of the neutral vocabulary EVENTS),
outcome (a started action ended: ok, or raises one of ERRORS with a code), query
(unread of a conversation).

A step with `"sdk": "py"` or `"js"` is played for that SDK only and must name its
`differs` id: the other SDK's behaviour there is the known difference, asserted by its
own step (so a fixed difference fails the suite until its steps and list are updated).
"""

from __future__ import annotations

import json
from pathlib import Path

SCENARIOS = Path(__file__).with_name("scenarios")
SERVER_STEPS = frozenset({"recv", "reply", "push", "quiet", "drop"})
APP_STEPS = frozenset({"app", "tell", "outcome", "query"})
ACTIONS = frozenset({"connect", "open_direct", "send_text", "leave_group", "join_room"})
EVENTS = frozenset({"state", "message_added", "pending_resolved", "send_failed", "kicked", "cursor_reset",
                    "room_events"})
ERRORS = frozenset({"ServerError", "PolicyRefused", "SendRefused", "Kicked"})
SDKS = ("py", "js")


class ScenarioError(ValueError):
    """A scenario file that breaks the format (the message names the file and step)."""


def applies(step: dict, sdk: str) -> bool:
    """True when `step` is played for `sdk` (module docstring)."""
    return step.get("sdk", sdk) == sdk


def paths() -> list[Path]:
    """Every scenario file, by name."""
    return sorted(SCENARIOS.glob("*.json"))


def load(path: str | Path) -> dict:
    """The scenario at `path`, checked against the format. ScenarioError."""
    path = Path(path)
    try:
        sc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path.name}: not JSON: {exc}") from None
    if sc.get("name") != path.stem or not sc.get("about") or not sc.get("steps"):
        raise ScenarioError(f"{path.name}: needs name (= the file's stem), about and steps")
    diffs = sc.get("differences", {})
    for key, d in diffs.items():
        if d.get("sdk") not in SDKS or not d.get("why"):
            raise ScenarioError(f"{path.name}: difference {key} needs sdk (py or js) and why")
    for i, step in enumerate(sc["steps"]):
        kind = next(iter(step), None)
        where = f"{path.name} step {i}"
        if kind not in SERVER_STEPS | APP_STEPS:
            raise ScenarioError(f"{where}: the first key must be a step kind, not {kind!r}")
        if kind == "app" and step["app"] not in ACTIONS:
            raise ScenarioError(f"{where}: unknown action {step['app']!r}")
        if kind == "tell" and step["tell"] not in EVENTS:
            raise ScenarioError(f"{where}: unknown event {step['tell']!r}")
        if kind == "outcome" and step.get("raises", "ServerError") not in ERRORS:
            raise ScenarioError(f"{where}: unknown error {step['raises']!r}")
        if "sdk" in step and (step["sdk"] not in SDKS or step.get("differs") not in diffs
                              or diffs[step["differs"]]["sdk"] not in SDKS):
            raise ScenarioError(f"{where}: a step for one SDK names a listed difference (differs)")
    return sc


def known_differences() -> list[tuple[str, str, str, str]]:
    """(scenario, difference id, sdk, why) of every scenario, sorted: docs/sdk.md lists them."""
    out = []
    for p in paths():
        for key, d in load(p).get("differences", {}).items():
            out.append((p.stem, key, d["sdk"], d["why"]))
    return sorted(out)
