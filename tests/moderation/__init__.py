"""Tests of the ModerationService (issue 38; docs/decisions/0123)."""
