"""Redis client factory and Lua scripts called by cached SHA."""
