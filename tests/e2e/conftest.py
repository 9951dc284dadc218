"""End-to-end tests use `stack` (session) and `fresh_stack` (function) from
tests/fixtures.py, imported once by tests/conftest.py: never redefine or re-import
them here (a second definition starts a second stack on the same engines)."""
