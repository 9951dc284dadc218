"""Run one fuzz target under atheris (libFuzzer, coverage-guided): the engine of
`make fuzz` (tests/fuzz/run.py); CI runs it briefly (tests/fuzz/test_targets.py) and
spends its fixed budget with the deterministic driver (tests/fuzz/seeded.py).

    python -m tests.fuzz.engine TARGET [--runs N | --seconds S] [--seed N]
                                [--work DIR] [FILE ...]

TARGET is frames, zstd, requests or backends (tests/fuzz/target_<TARGET>.py). The
modules of qim and tests.fuzz are instrumented, so coverage of the pure frame twin
guides the search for both twins (the compiled one is compared on every input); the
corpus starts from tests/fuzz/corpus/TARGET and grows in DIR/corpus/TARGET. A finding
(an exception out of the target, an input slower than --timeout seconds, the process
above --rss-mb) makes libFuzzer write the input to DIR/artifacts/TARGET-crash-* and exit
non-zero. Given FILEs, only those inputs are run (reproduction). --libfuzzer passes
further libFuzzer flags (e.g. -dict=FILE). libFuzzer's final statistics
(stat::number_of_executed_units) are the last lines printed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

TARGETS = ("frames", "zstd", "requests", "backends")
HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
MAX_LEN = 8192  # bombs and 4 MiB frames are built from a few input bytes (draw.Draw.sized)


def libfuzzer_args(args: argparse.Namespace) -> list[str]:
    """The libFuzzer command line for `args` (corpus dirs first, then flags)."""
    work = Path(args.work)
    corpus = work / "corpus" / args.target
    artifacts = work / "artifacts"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    flags = [f"-seed={args.seed}", f"-timeout={args.timeout}", f"-rss_limit_mb={args.rss_mb}",
             f"-max_len={MAX_LEN}", f"-artifact_prefix={artifacts}/{args.target}-", "-print_final_stats=1",
             "-error_exitcode=77", "-timeout_exitcode=78", "-len_control=0"]
    flags += args.libfuzzer
    if args.files:
        return [sys.argv[0], *flags, *args.files]
    flags.append(f"-max_total_time={args.seconds}" if args.seconds else f"-runs={args.runs}")
    seeds = CORPUS / args.target
    return [sys.argv[0], str(corpus), *([str(seeds)] if seeds.is_dir() else []), *flags]


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, instrument, fuzz (libFuzzer exits the process)."""
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=TARGETS)
    parser.add_argument("files", nargs="*", help="inputs to run once each (reproduce a finding)")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=0, help="time budget instead of --runs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", default="build/fuzz", help="corpus growth and crash artifacts")
    parser.add_argument("--timeout", type=int, default=30, help="seconds one input may take (hang)")
    parser.add_argument("--rss-mb", type=int, default=2048, help="memory limit of the fuzz process")
    parser.add_argument("--libfuzzer", action="append", default=[], metavar="FLAG",
                        help="a further libFuzzer flag, e.g. --libfuzzer=-dict=FILE")
    args = parser.parse_intermixed_args(argv)
    import atheris

    with atheris.instrument_imports(include=["qim", "tests.fuzz"]):
        import importlib

        target = importlib.import_module(f"tests.fuzz.target_{args.target}")
    one_input = target.one_input
    if os.environ.get("QIM_FUZZ_SELFTEST") == "1":  # tests/fuzz/test_targets.py: a finding is reported
        from tests.fuzz.draw import Finding

        def one_input(data: bytes) -> None:
            raise Finding("self-test finding")
    print(f"fuzz-target: start target={args.target} seed={args.seed} pid={os.getpid()}", flush=True)
    atheris.Setup(libfuzzer_args(args), one_input)
    atheris.Fuzz()  # libFuzzer ends the process


if __name__ == "__main__":
    main()
