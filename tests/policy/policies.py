"""Send policies for the tests (QIM_SEND_POLICY=tests.policy.policies:by_content), loaded
by the writer and room processes of a test stack (docs/decisions/0099).

`by_content` decides by the body, so every kind of send can be steered from a test:
- b"spam" in it: refused ("spam is not welcome here");
- b"hold" in it: held for 300 ms, every time it is asked;
- b"once-held" in it: held the first time its (sender, cmid) is asked, accepted after;
- b"flip-refused" in it: refused the first time, accepted if asked again (a retry must
  still get the refusal: the seam remembers it);
- b"flip-accepted" in it: accepted the first time, refused if asked again (a retry
  must still get the original ACK: the commit binds it);
- anything else: accepted.
`asked` counts the calls per (kind, sender, cmid) in this process (it is per process).
"""

from __future__ import annotations

import asyncio
import collections

from qim.policy import ACCEPT, Hold, Refuse, SendFacts, Verdict

asked: collections.Counter = collections.Counter()


async def by_content(facts: SendFacts) -> Verdict:
    """The test policy (module doc); async, as a policy asking another service would be."""
    await asyncio.sleep(0)
    key = (facts.kind, facts.tenant, facts.user_id, facts.client_message_id)
    asked[key] += 1
    first = asked[key] == 1
    body = facts.body
    if b"spam" in body:
        return Refuse("spam is not welcome here")
    if b"once-held" in body:
        return Hold(200, "under review") if first else ACCEPT
    if b"hold" in body:
        return Hold(300, "under review")
    if b"flip-refused" in body:
        return Refuse("refused at first sight") if first else ACCEPT
    if b"flip-accepted" in body:
        return ACCEPT if first else Refuse("changed its mind")
    return ACCEPT


def not_a_policy() -> None:
    """Callable but never a policy: a test only loads it by name."""


NOT_CALLABLE = 42
