"""ConnectionNode (qim-gateway): client connections, auth, validation, routing, PUSH."""
