"""Frame-speaking asyncio streams and internal RPC (no byte slicing above qim._core)."""
