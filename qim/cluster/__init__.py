"""Several nodes of each kind (docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md):
shard placement over the live nodes (placement.py), the lease keeper every shard owner
runs (keeper.py) and the cached owner table routers read (owners.py). Built on the
ShardRegistry store interface (qim/stores/registry.py); no service imports another
through here."""
