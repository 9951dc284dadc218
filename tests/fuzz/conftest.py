"""The live target's fixture: the session's real stack (tests/e2e/conftest.py), shared
with the end-to-end tests when both run in one session."""

from tests.e2e.conftest import stack  # noqa: F401
