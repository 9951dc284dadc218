"""What each Redis command of a group's per-member append costs inside one script
(docs/perf.md "Group fan-out: the per-member commands"; qim/stores/redis/lua/mailbox_lib.lua
`qim_append`).

    .venv/bin/python benches/bench_group_append.py [--members 1000] [--rounds 200]

Starts a private Redis, then runs three scripts, each appending one entry to each of
`--members` mailboxes (a day bucket and a day index per member) in one EVALSHA, like
mailbox_fused.lua does for a group record:
- `current`: qim_append's commands (ZADD, EXPIREAT of the bucket, HGET and HSET of the
  day index, EXPIRE of the index);
- `no_index_expire`: without the EXPIRE of the day index;
- `index_zset`: the day index as a sorted set (docs/decisions/0064): ZADD GT keeps the
  day's highest offset in one command (by pcall, as the shipped script: it moves an
  index of the old layout on WRONGTYPE), and the index's expiry is set only when the
  day is new to it;
- `zadd_only`: the entry alone (a lower bound: no expiry, no index).
Prints Redis's own time per member (`INFO commandstats` usec_per_call of EVALSHA / members,
so the client's time is not in it), three repetitions each, alternating. The scripts
copy the command sequence, not the shipped script: a bench of where the time goes, not
a test of the store.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim.dev.redis_engine import start_redis  # noqa: E402

APPEND = {
    "current": """
  redis.call('ZADD', KEYS[i], off, ARGV[j])
  redis.call('EXPIREAT', KEYS[i], exp)
  local cur = tonumber(redis.call('HGET', KEYS[i + 1], day) or '-1')
  if off > cur then redis.call('HSET', KEYS[i + 1], day, off) end
  redis.call('EXPIRE', KEYS[i + 1], ttl)
""",
    "no_index_expire": """
  redis.call('ZADD', KEYS[i], off, ARGV[j])
  redis.call('EXPIREAT', KEYS[i], exp)
  local cur = tonumber(redis.call('HGET', KEYS[i + 1], day) or '-1')
  if off > cur then redis.call('HSET', KEYS[i + 1], day, off) end
""",
    "index_zset": """
  redis.call('ZADD', KEYS[i], off, ARGV[j])
  redis.call('EXPIREAT', KEYS[i], exp)
  local added = redis.pcall('ZADD', KEYS[i + 1], 'GT', off, day)
  if type(added) == 'table' and added.err then error(added) end
  if added == 1 then redis.call('EXPIRE', KEYS[i + 1], ttl) end
""",
    "zadd_only": """
  redis.call('ZADD', KEYS[i], off, ARGV[j])
""",
}
SCRIPT = """
local off, exp, ttl, day = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
for i = 1, #KEYS, 2 do
  local j = 4 + (i + 1) / 2
%s
end
return 1
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qim-bench-append-") as tmp:
        engine = start_redis(Path(tmp) / "redis")
        try:
            r = engine.client()
            keys: list[str] = []
            for m in range(args.members):
                keys += [f"{{s1}}:mb:{m}:d:20261202", f"{{s1}}:mbidx:{m}"]
            tails = [os.urandom(24) for _ in range(args.members)]
            shas = {name: r.script_load(SCRIPT % body) for name, body in APPEND.items()}
            expire_at = int(time.time()) + 7 * 86400
            per_member: dict[str, list[float]] = {name: [] for name in APPEND}
            for _ in range(3):
                for name, sha in shas.items():
                    r.flushall()
                    r.config_resetstat()
                    for k in range(args.rounds):  # a new mailbox_seq prefix per record: new members
                        members = [k.to_bytes(8, "big") + t for t in tails]
                        r.evalsha(sha, len(keys), *keys, 1000 + k, expire_at, 8 * 86400, "20261202", *members)
                    usec = r.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]
                    per_member[name].append(round(usec / args.members, 2))
            for name, figures in per_member.items():
                print(f"{name}: Redis µs per member {figures}")
        finally:
            engine.stop()


if __name__ == "__main__":
    main()
