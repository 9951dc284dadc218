"""CPU of building one durable projection batch's registrations (qim/services/session/register.py):
every record's from_message() then merge(), against registrations(), which collapses
the group records of one conversation to the same recipients first
(docs/perf.md "Group fan-out, round four").

    .venv/bin/python benches/bench_registrations.py [--members 1000] [--records 30] [--direct 50]

A batch of `--records` group records to one `--members`-member group (the senders among
the members) and `--direct` direct records, as the session's dispatch consumer takes one
poll. Prints µs per batch of each way, best of five, alternating, and their ratio; the
two results are compared (a bench that builds a different set is an error).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim._core import ids  # noqa: E402
from qim.services.session.register import Message, from_message, merge, registrations  # noqa: E402


def everyone(user: int) -> bool:
    return True


def batch(members: int, records: int, direct: int) -> list[Message]:
    group = ids.conversation_id_group(0, 7)
    users = list(range(1000, 1000 + members))
    out = [Message(0, group, seq, 1_700_000_000_000 + seq, users[seq % members], users) for seq in range(records)]
    for k in range(direct):
        a, b = 10 + k, 5000 + k
        out.append(Message(0, ids.conversation_id_direct(0, a, b), k + 1, 1_700_000_000_000 + k, a, [b]))
    return out


def reference(messages: list[Message]) -> list:
    return merge([r for m in messages for r in from_message(*m, everyone)])


def best_us(fn, messages: list[Message]) -> float:
    t0 = time.perf_counter()
    fn(messages)
    return (time.perf_counter() - t0) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--records", type=int, default=30)
    parser.add_argument("--direct", type=int, default=50)
    args = parser.parse_args()
    messages = batch(args.members, args.records, args.direct)
    if sorted(reference(messages)) != sorted(registrations(messages, everyone)):
        raise SystemExit("the two ways built different registrations")
    old, new = [], []
    for _ in range(5):
        old.append(best_us(reference, messages))
        new.append(best_us(lambda m: registrations(m, everyone), messages))
    print(f"from_message + merge: {min(old):,.0f} µs per batch; registrations: {min(new):,.0f} µs; "
          f"ratio {min(old) / min(new):.1f}")


if __name__ == "__main__":
    main()
