"""Fuzzing of the frame codec, zstd bodies, request protobufs and the live gateway.

Targets 1-3 are functions `one_input(data: bytes) -> None` (tests/fuzz/target_*.py) that
raise `Finding` when a property breaks; tests/fuzz/engine.py runs one of them under
atheris (libFuzzer, coverage-guided), tests/fuzz/run.py runs all of them for `make fuzz`,
and the tests in this folder run them with a fixed seed in CI. Target 4 is
tests/fuzz/test_live_gateway.py (a real stack over TCP). docs: tests/fuzz/README.md.
"""
