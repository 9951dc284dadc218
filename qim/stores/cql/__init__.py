"""The CQL backend of the archive tier (docs/decisions/0023-archive-tier.md).

ScyllaDB in production, Apache Cassandra 5.0 on development machines (decision 0015),
through the scylla-driver (`cassandra` module), imported only inside this package.

| module | what |
|---|---|
| session.py | one driver Cluster/Session per process, an asyncio bridge, the error boundary |
| errors.py | the one table mapping driver exceptions to qim/stores/errors.py |
| schema.py | keyspace and tables, `apply` (qimctl schema apply), `check` (every service) |
| codec.py | MessageRecord <-> row, the seq bucket, u64 checks (bit 63 clear) |
| messages.py | CqlMessageStore: the MessageStore Protocol over the archived history |
| archive.py | CqlArchive: the HistoryArchiver's writes, the trimmer's checks, the audit's reads |
| conversations.py | user_conversation_state (first registrations of SessionProjection) |
| backend.py | CqlBackend: session + stores + checks |
| mailbox_schema.py, frontier.py, mailbox_buckets.py, mailboxes.py | the CQL MailboxStore (QIM_MAILBOX_STORE=cql, decision 0102) |
"""
