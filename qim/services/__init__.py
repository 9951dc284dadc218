"""Plain-Python asyncio services over real Redis and a Kafka-API broker (docs/design.md §2)."""
