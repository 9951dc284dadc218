"""Placement of shards over live nodes (qim/cluster/placement.py; docs/design.md §13): every
node computes the same owner; a joining node takes about 1/N of the shards and only
those move; a leaving node's shards spread over the others and nothing else moves."""

from __future__ import annotations

from qim.cluster.placement import owner_of, shards_of

COUNT = 64


def table(kind: str, nodes: list[str]) -> dict[int, str]:
    return {s: owner_of(kind, s, nodes) for s in range(COUNT)}


def test_every_node_agrees_and_each_gets_a_share():
    nodes = ["mailbox@a:1", "mailbox@b:1", "mailbox@c:1"]
    t = table("mailbox", nodes)
    assert t == table("mailbox", list(reversed(nodes)))  # order of the live list does not matter
    mine = [shards_of("mailbox", COUNT, nodes, n) for n in nodes]
    assert set().union(*mine) == set(range(COUNT)) and sum(map(len, mine)) == COUNT
    assert all(8 <= len(m) <= 40 for m in mine), [len(m) for m in mine]
    assert table("session", nodes) != t  # kinds are placed independently
    assert owner_of("mailbox", 0, []) == ""


def test_a_join_moves_only_shards_to_the_newcomer_and_a_leave_only_the_leavers_shards():
    before = table("mailbox", ["a", "b", "c"])
    after = table("mailbox", ["a", "b", "c", "d"])
    moved = {s for s in range(COUNT) if before[s] != after[s]}
    assert moved and all(after[s] == "d" for s in moved)
    assert 4 <= len(moved) <= 32
    gone = table("mailbox", ["a", "c"])
    assert all(gone[s] == before[s] for s in range(COUNT) if before[s] != "b")
