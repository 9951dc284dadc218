"""MailboxNode + MailboxMaterializer (qim-mailbox): dispatch log -> user mailboxes."""
