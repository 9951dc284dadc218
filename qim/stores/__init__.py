"""The storage layer (docs/decisions/0019-storage-layer.md).

One store per domain, each the only owner of its keys, scripts and error mapping:

| module | interface | domain |
|---|---|---|
| messages.py | MessageStore | canonical MessageRecords, the history index, message state |
| commits.py | CommitStore | commit state machine, in-flight and unpublished indexes |
| leases.py | ClockLeaseStore | writer_id leases and HLC windows |
| groups.py | GroupStore | group meta, member intervals, member snapshots |
| mailboxes.py | MailboxStore | user mailboxes, DispatchProgress, shard watermarks |
| sessions.py | SessionStore | conversation sets, direct peers, the projection checkpoint |
| reads.py | ReadPositionStore | read_conversation_seq per (user, conversation) |
| push.py | PushRegistrationStore | device push registrations (docs/decisions/0128) |
| archive.py | ArchiveStore, ConversationStateStore, ArchiveStateStore, HotHistory | the archive tier (docs/decisions/0023) |
| tiered.py | TieredMessageStore | MessageStore over Redis above each hot floor and CQL below |
| retention.py | (pure) | retention classes and row TTLs |

Services depend on these typing.Protocol interfaces and the typed errors of
qim/stores/errors.py, never on a driver; `qim.stores.open.open_stores` builds a backend
(Redis in qim/stores/redis/, with the archive tier in qim/stores/cql/ when configured:
docs/decisions/0023-archive-tier.md). Importing this package imports no driver.
"""
