"""ConversationWriter + MessageCommitter (qim-writer): the only producer of SEND_ACK."""
