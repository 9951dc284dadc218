"""`python -m qim.app <service>`: qim.app.main.main(<service>) (qim/topology.py rows)."""

import sys

from qim.app.main import main
from qim.topology import processes

if __name__ == "__main__":
    names = [s.name for s in processes()]
    if len(sys.argv) != 2 or sys.argv[1] not in names:
        print(f"usage: python -m qim.app {{{','.join(names)}}}", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
