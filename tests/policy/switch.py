"""A send policy whose answer is changed from outside its process, for the tests of a
refusal that must outlive the writer (docs/decisions/0099, Amendment):
QIM_SEND_POLICY=tests.policy.switch:by_switch, with POLICY_SWITCH_FILE naming a file.

A send whose body holds b"switch" is answered from that file, read at every call:
"refuse:<reason>" refuses with <reason>, "hold" holds for 300 ms, anything else accepts. Every other send is
answered by tests.policy.policies.by_content, so one stack serves both."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Awaitable, Union

from qim.policy import ACCEPT, Hold, Refuse, SendFacts, Verdict
from tests.policy.policies import by_content


def by_switch(facts: SendFacts) -> Union[Verdict, Awaitable[Verdict]]:
    """The test policy (module doc): synchronous for a switch send (the file is read per
    call: tiny, test-only), by_content's awaitable for any other."""
    if b"switch" not in facts.body:
        return by_content(facts)
    said = Path(os.environ["POLICY_SWITCH_FILE"]).read_text().strip()
    if said == "hold":
        return Hold(300, "under review")
    return Refuse(said.removeprefix("refuse:")) if said.startswith("refuse:") else ACCEPT
