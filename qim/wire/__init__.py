"""Wire-level helpers shared by clients and servers (no service imports)."""
