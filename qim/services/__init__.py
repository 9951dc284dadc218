"""Plain-Python asyncio services over real Redis and a Kafka-API broker (DESIGN.md §2)."""
