"""`qim-loadgen`: acceptance and load driver (docs/design.md §2, §12).

Subcommands:
  replay   replay chatterbot-corpus dialogues through the real stack and verify
           delivery (qim/cli/replay.py; the `make demo` target).
  rate     open-loop load at an explicit target rate with per-5 s ACK and
           end-to-end latency segments (qim/cli/loadgen_rate.py).
  room     one chatroom of N online members at M posts/s: every member told every
           post once in room_seq order, delivery P50/P99 (qim/cli/loadgen_room.py).
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

USAGE = "usage: qim-loadgen replay|rate|room [options]   (qim-loadgen COMMAND --help for options)"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Dispatch `qim-loadgen SUBCOMMAND ...` (replay, rate, room); the exit code of the subcommand."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\n" + USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "replay":
        from qim.cli import replay

        return replay.main(rest)
    if command == "rate":
        from qim.cli import loadgen_rate

        return loadgen_rate.main(rest)
    if command == "room":
        from qim.cli import loadgen_room

        return loadgen_room.main(rest)
    print(f"qim-loadgen: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
