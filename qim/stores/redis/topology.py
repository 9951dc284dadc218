"""Several standalone Redis instances, each key on exactly one (docs/decisions/0096).

A deployment lists its instances per role (RedisLayout, qim/config/redislayout.py):

- **core** instances hold what a conversation's commit touches: commit facts, the
  idempotency keys, conversation_seq, the hot history, group members, retention, the
  commit bucket's in-flight set. A conversation's keys all carry the hash tag of its
  commit bucket (keys.py), and bucket b (0..COMMIT_BUCKET_COUNT-1) lives on core
  instance `b * n // COMMIT_BUCKET_COUNT` (contiguous ranges: growing by splitting a
  range moves only the buckets of the instance split). Every commit Lua call touches
  one bucket, so it runs on one instance, atomically, as before. An operator's move
  (`qimctl redis move-bucket`, decision 0113) places a bucket elsewhere through the
  placement map, and a bucket being moved is refused on every call. Keys that belong to
  no bucket (HLC clock leases, writer leases, the archive's checkpoint, watermark,
  lease and trim queue, the room epoch) live on core instance 0, the **home**.
  Revocation cutoffs are read inside the commit call (decision 0080), so they are
  written to every core instance (rare writes, a local read on the hot path).
- **mailbox** instances hold what a MailboxShard owns: its users' mailboxes and day
  indexes, its DispatchProgress and watermark, and the user state the session
  projection writes with its shard's checkpoint (conversation sets, peers, names, read
  positions, the first-registration queue, session epochs). Shard s lives on mailbox
  instance `s % n`; a user on the instance of its MailboxShard (user_placement of its
  virtual bucket), so one shard's fused mailbox call and one shard's session
  projection still run as one atomic call on one instance. An operator's move
  (`qimctl redis move-shard`) places a shard elsewhere through the placement map
  (placement.py, docs/decisions/0104): a shard in it is on its named instance, a shard
  being moved is refused (StoreUnavailable) on every call until the move switches it.

One instance for both roles (the development default, QIM_REDIS_ADDR alone) gives the
same client everywhere: one pool, behaviour unchanged. Several roles may name the same
address; each distinct address gets one client.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from qim.config.redislayout import RedisLayout
from qim.stores.errors import StoreUnavailable
from qim.stores.redis.placement import Placement, PlacementView
from qim.stores.redis.scripts import boundary


class RedisTopology:
    """The clients of a RedisLayout: `connect(addr)` makes one per distinct address.
    Stores ask it for the client that holds a key family:

        topology.core(bucket)          # a conversation's commit bucket
        topology.shard(shard)          # a MailboxShard's instance
        topology.user(tenant, user)    # the instance of that user's MailboxShard
        topology.home                  # keys of no bucket
        topology.scripts(client, names, coalesce)   # Scripts of that client, made once
    """

    def __init__(self, layout: RedisLayout, connect: Any) -> None:
        self.layout = layout
        self.clients: dict[str, Any] = {a: connect(a) for a in layout.addrs}
        self._core = [self.clients[a] for a in layout.core]
        self._mailbox = [self.clients[a] for a in layout.mailbox]
        self._scripts: dict[tuple[int, tuple[str, ...], bool], Any] = {}
        self.placement = PlacementView(self.home, layout.mailbox, layout.core)  # decisions 0104, 0113

    @property
    def single(self) -> bool:
        """True when every role is on one instance."""
        return len(self.clients) == 1

    @property
    def home(self) -> Any:
        """The client of core instance 0 (keys of no bucket)."""
        return self._core[0]

    @property
    def core_clients(self) -> list[Any]:
        """Every core instance's client, in layout order."""
        return list(self._core)

    @property
    def mailbox_clients(self) -> list[Any]:
        """Every distinct mailbox instance's client, in layout order."""
        return list(dict.fromkeys(self._mailbox))

    def _map(self, unit: str, n: int) -> Placement:
        """The placement map in force (a refresh started when due); StoreUnavailable when
        it may be out of date (placement.py STALE_S) naming the call's unit and number
        (the message is only built then: this runs on every core call)."""
        view = self.placement
        view.tick()
        if view.stale():
            raise StoreUnavailable(f"{unit} {n}: the Redis placement map has not been read for a while "
                                   f"(home unreachable? {view.error or 'no answer'}): retry")
        return view.current

    def core(self, bucket: int) -> Any:
        """The client holding commit bucket `bucket`: its placement map entry, else
        `b*n//256`. StoreUnavailable while an operator moves it (decision 0113): every
        core call of the bucket (reserve, commit, hot history, members...) is refused
        and retried by its caller, so nothing of it is written while it is copied."""
        if self.single:
            return self._core[self.layout.core_index(bucket)]
        p = self._map("commit bucket", bucket)
        if bucket in p.buckets_moving:
            raise StoreUnavailable(f"commit bucket {bucket} is being moved to {p.buckets_moving[bucket]} "
                                   "(qimctl redis move-bucket): retry")
        addr = p.buckets.get(bucket)
        return self.clients[addr] if addr is not None else self._core[self.layout.core_index(bucket)]

    def moving_buckets(self) -> frozenset[int]:
        """The commit buckets being moved now (decision 0113)."""
        if self.single:
            return frozenset()
        self.placement.tick()
        return frozenset(self.placement.current.buckets_moving)

    def shard(self, shard: int) -> Any:
        """The client holding MailboxShard `shard`: its placement map entry, else
        `s mod n`. StoreUnavailable while an operator moves it (decision 0104)."""
        if self.single:
            return self._mailbox[0]
        p = self._map("MailboxShard", shard)
        if shard in p.moving:
            raise StoreUnavailable(f"MailboxShard {shard} is being moved to {p.moving[shard]} "
                                   "(qimctl redis move-shard): retry")
        addr = p.shards.get(shard)
        return self.clients[addr] if addr is not None else self._mailbox[self.layout.mailbox_index(shard)]

    def moving_shards(self) -> frozenset[int]:
        """The MailboxShards being moved now: no node may hold their leases (decision 0104)."""
        if self.single:
            return frozenset()
        self.placement.tick()
        return frozenset(self.placement.current.moving)

    async def load_placement(self) -> None:
        """Read the placement map now (at start); ValueError when it names an address that
        is not a mailbox (core, for a bucket) instance of the layout, StoreUnavailable
        when the home is down."""
        if not self.single:
            with boundary("redis placement map"):
                await self.placement.load()

    def user(self, tenant: int, user_id: int) -> Any:
        """The client holding a user's mailbox and session state."""
        return self.shard(self.layout.user_shard(tenant, user_id))

    def addr_of(self, client: Any) -> str:
        """The address of one of this topology's clients (for messages)."""
        for addr, c in self.clients.items():
            if c is client:
                return addr
        raise KeyError("not a client of this topology")

    def scripts(self, client: Any, names: Sequence[str], coalesce: bool = False) -> Any:
        """The Scripts of `names` over `client`, made once (its SHAs cached)."""
        from qim.stores.redis.scripts import Scripts

        key = (id(client), tuple(names), coalesce)
        got = self._scripts.get(key)
        if got is None:
            got = self._scripts[key] = Scripts(client, names, coalesce=coalesce)
        return got

    def group_by(self, items: Sequence[Any], client_of: Any) -> list[tuple[Any, list[Any]]]:
        """[(client, its items in order)] for `items` split by `client_of(item)`; one
        group per instance touched, in order of first appearance."""
        out: dict[int, tuple[Any, list[Any]]] = {}
        for item in items:
            c = client_of(item)
            out.setdefault(id(c), (c, []))[1].append(item)
        return list(out.values())

    async def aclose(self) -> None:
        """Stop the placement map's refresh, close every client's pool."""
        await self.placement.aclose()
        for c in self.clients.values():
            await c.aclose()


def as_topology(client_or_topology: Any) -> RedisTopology:
    """A store's argument as a RedisTopology: itself, or one redis-py client holding
    every role (tools and unit tests that made a client of their own)."""
    if isinstance(client_or_topology, RedisTopology):
        return client_or_topology
    return RedisTopology(RedisLayout.single("client:0"), lambda _addr: client_or_topology)


def topology_of(layout_or_addr: "RedisLayout | str", connect: Optional[Any] = None) -> RedisTopology:
    """A RedisTopology for a layout, or for one 'host:port' holding everything."""
    if connect is None:
        from qim.infra.redis.client import connect as connect_
        connect = connect_
    layout = RedisLayout.single(layout_or_addr) if isinstance(layout_or_addr, str) else layout_or_addr
    return RedisTopology(layout, connect)
