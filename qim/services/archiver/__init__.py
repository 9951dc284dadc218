"""HistoryArchiver (qim-archiver; DESIGN.md §2, §5 step 7; docs/decisions/0023)."""
