"""`python -m qim.app <service> [-h]`: qim.app.main.main(<service>) (qim/topology.py rows),
the service's own arguments after its name (the dev stack and `qim-<service>` alike)."""

import sys

from qim.app.main import main
from qim.topology import processes

if __name__ == "__main__":
    names = [s.name for s in processes()]
    usage = f"usage: python -m qim.app {{{','.join(names)}}} [-h]"
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(usage)
        sys.exit(0)
    if len(sys.argv) < 2 or sys.argv[1] not in names:
        print(usage, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2:])
