"""`qim-loadgen`: acceptance and load driver (DESIGN.md §2, §12).

Subcommands:
  replay   replay chatterbot-corpus dialogues through the real stack and verify
           delivery (qim/cli/replay.py; the `make demo` target).

The rate-driven load lane (explicit target rate, per-5 s latency segments) is not
built yet; it will be another subcommand here.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

USAGE = "usage: qim-loadgen replay [options]   (qim-loadgen replay --help for options)"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\n" + USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "replay":
        from qim.cli import replay

        return replay.main(rest)
    print(f"qim-loadgen: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
