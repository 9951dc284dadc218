"""The deterministic driver of the fuzz targets: CI's 5 x 10^4 inputs (tests/fuzz/test_targets.py).

    python -m tests.fuzz.seeded TARGET [--runs N] [--seed S]

Runs every saved input of tests/fuzz/corpus/TARGET, then N inputs from a PRNG seeded
with S: random decision streams of 16 B..8 KiB, and saved inputs mutated the way
libFuzzer does (bits flipped, bytes inserted or erased, two inputs spliced). The same
seed gives the same inputs on every machine, so CI never meets a new random input;
exploration with coverage feedback is `make fuzz` (tests/fuzz/engine.py, atheris).
Each input must finish within HANG_S (SIGALRM) and the process must stay under
RSS_LIMIT_MB. A finding prints the target, the property, and the input's path
(written under --work) and exits 1. The last line is
`fuzz-target: target=T inputs=N findings=0|1 seconds=X peak_rss_mb=M`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Iterator

from tests.fuzz.draw import Finding

CORPUS = Path(__file__).resolve().parent / "corpus"
TARGETS = ("frames", "zstd", "requests", "backends")
HANG_S = 30
RSS_LIMIT_MB = 2048
LENGTHS = (16, 64, 256, 1024, 4096, 8192)


class Hang(Finding):
    """One input ran longer than HANG_S."""


def saved(target: str) -> list[bytes]:
    """The saved inputs of a target, in file-name order."""
    folder = CORPUS / target
    return [p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()] if folder.is_dir() else []


def mutated(rnd: random.Random, base: bytes, other: bytes) -> bytes:
    """`base` changed by one to four libFuzzer-style mutations (`other` for splicing)."""
    data = bytearray(base or b"\0")
    for _ in range(rnd.randint(1, 4)):
        how = rnd.randrange(5)
        at = rnd.randrange(len(data) + 1)
        if how == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << rnd.randrange(8)
        elif how == 1:
            data[at:at] = rnd.randbytes(rnd.randint(1, 16))
        elif how == 2 and len(data) > 1:
            del data[at:at + rnd.randint(1, 16)]
        elif how == 3:
            data[at:] = other[rnd.randrange(len(other) + 1):] if other else b""
        else:
            data[min(at, len(data) - 1):min(at, len(data) - 1) + 1] = bytes([rnd.choice((0, 1, 0x7F, 0x80, 0xFF))])
    return bytes(data)


def inputs(target: str, runs: int, seed: int) -> Iterator[bytes]:
    """The saved inputs, then `runs` generated ones (deterministic for a seed)."""
    corpus = saved(target)
    yield from corpus
    rnd = random.Random(f"qim-fuzz/{target}/{seed}")
    for _ in range(runs):
        if corpus and rnd.random() < 0.3:
            yield mutated(rnd, rnd.choice(corpus), rnd.choice(corpus))
        else:
            yield rnd.randbytes(rnd.randint(1, rnd.choice(LENGTHS)))


def _alarm(signum, frame) -> None:
    raise Hang(f"an input ran longer than {HANG_S} s")


def run(target: str, runs: int, seed: int, work: Path) -> tuple[int, int]:
    """(inputs run, findings) for one target; prints the finding and saves its input."""
    one_input = importlib.import_module(f"tests.fuzz.target_{target}").one_input
    if os.environ.get("QIM_FUZZ_SELFTEST") == "1":  # tests/fuzz/test_targets.py: a finding is reported
        def one_input(data: bytes) -> None:
            raise Finding("self-test finding")
    signal.signal(signal.SIGALRM, _alarm)
    count = 0
    for data in inputs(target, runs, seed):
        count += 1
        signal.alarm(HANG_S)
        try:
            one_input(data)
        except Exception as exc:  # noqa: BLE001 - a Finding, or a crash of the code under test
            signal.alarm(0)
            work.mkdir(parents=True, exist_ok=True)
            path = work / f"{target}-finding-{seed}-{count}"
            path.write_bytes(data)
            traceback.print_exc()
            print(f"fuzz-finding: target={target} input={path} {type(exc).__name__}: {exc}", flush=True)
            return count, 1
        signal.alarm(0)
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        if rss_mb > RSS_LIMIT_MB:
            print(f"fuzz-finding: target={target} process RSS {rss_mb} MiB > {RSS_LIMIT_MB} MiB after {count} inputs")
            return count, 1
    return count, 0


def main(argv: list[str] | None = None) -> None:
    """Command line (module doc); exit 1 on a finding."""
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.seeded", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=TARGETS)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", default="build/fuzz/findings")
    args = parser.parse_args(argv)
    started = time.monotonic()
    count, findings = run(args.target, args.runs, args.seed, Path(args.work))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"fuzz-target: target={args.target} inputs={count} findings={findings} "
          f"seconds={time.monotonic() - started:.0f} peak_rss_mb={rss_mb}", flush=True)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
