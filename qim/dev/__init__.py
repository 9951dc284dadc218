"""Development tooling: private engines (Redis, Kafka) and the `qim-dev` CLI."""
