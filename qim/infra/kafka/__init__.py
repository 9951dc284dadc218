"""confluent-kafka behind an asyncio thread bridge."""
