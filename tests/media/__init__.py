"""Tests of the MediaService and its object store (issue 40; docs/decisions/0137)."""
