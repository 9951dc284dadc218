"""The Redis backend of the stores (docs/design.md §8: standalone Redis 7+, AOF, noeviction,
Lua by cached SHA). Key layout in keys.py, Lua next to it in lua/, the one error table
in errors.py; backend.py builds every store over one connection pool."""
