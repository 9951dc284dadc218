"""FanoutCoordinator (qim-fanout): Outbox -> one GroupDispatch per target MailboxShard."""
