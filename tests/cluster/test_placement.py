"""Placement of shards over live nodes (qim/cluster/placement.py; docs/design.md §13): every
node computes the same owner; loads differ by at most one shard; a joining node takes
about 1/N of the shards and few others move; a leaving node's shards spread over the
others and few others move."""

from __future__ import annotations

from qim.cluster.placement import owner_of, shards_of, table

COUNT = 64


def test_every_node_agrees_and_the_loads_differ_by_at_most_one():
    nodes = ["mailbox@a:1", "mailbox@b:1", "mailbox@c:1"]
    t = table("mailbox", COUNT, nodes)
    assert t == table("mailbox", COUNT, list(reversed(nodes)))  # order of the live list does not matter
    mine = [shards_of("mailbox", COUNT, nodes, n) for n in nodes]
    assert set().union(*mine) == set(range(COUNT)) and sum(map(len, mine)) == COUNT
    assert sorted(map(len, mine)) == [21, 21, 22]
    assert table("session", COUNT, nodes) != t  # kinds are placed independently
    assert owner_of("mailbox", 0, COUNT, []) == ""
    assert owner_of("mailbox", 5, COUNT, nodes) == t[5]


def test_two_partitions_over_two_nodes_one_each():
    for i in range(50):  # plain rendezvous would give both to one node about half the time
        nodes = [f"fanout@127.0.0.1:{1000 + 2 * i}", f"fanout@127.0.0.1:{1001 + 2 * i}"]
        assert sorted(len(shards_of("fanout", 2, nodes, n)) for n in nodes) == [1, 1]


def test_a_join_moves_about_its_share_and_a_leave_about_the_leavers():
    before = table("mailbox", COUNT, ["a", "b", "c"])
    after = table("mailbox", COUNT, ["a", "b", "c", "d"])
    moved = {s for s in range(COUNT) if before[s] != after[s]}
    to_new = {s for s in moved if after[s] == "d"}
    assert len(to_new) == 16 and len(moved) - len(to_new) <= 8, (len(to_new), len(moved))
    gone = table("mailbox", COUNT, ["a", "c"])
    kept = sum(gone[s] == before[s] for s in range(COUNT) if before[s] != "b")
    assert kept >= sum(before[s] != "b" for s in range(COUNT)) - 8
