"""Redis plumbing: connections and deployment checks. Key layouts, Lua scripts and the
error table belong to the stores (qim/stores/redis/)."""
