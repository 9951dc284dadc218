"""HistoryArchiver (qim-archiver; docs/design.md §2, §5 step 7; docs/decisions/0023)."""
