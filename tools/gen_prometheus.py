"""Write deploy/prometheus/prometheus.yml from the service table (qim/obs/scrape.py).

Usage: python tools/gen_prometheus.py [OUT]   (default: deploy/prometheus/prometheus.yml)
tests/ops/test_scrape_jobs.py fails while the committed file differs from the output.
"""

from __future__ import annotations

import pathlib
import sys

from qim.obs.scrape import render

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    """Write the file; 0."""
    out = pathlib.Path(argv[1]) if len(argv) > 1 else ROOT / "deploy" / "prometheus" / "prometheus.yml"
    out.write_text(render())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
