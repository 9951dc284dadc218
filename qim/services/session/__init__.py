"""SessionProjection (qim-session): conversation sets, session list, unread, MARK_READ."""
