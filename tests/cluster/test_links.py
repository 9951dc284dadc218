"""GatewayLinks.sync (qim/cluster/links.py): a linked gateway listed again after a sync
that did not list it (its lease lapsed, its process lived on) goes to `on_back` once;
one never unlisted, a new one and one back on another address do not (decision 0153)."""

from __future__ import annotations

import asyncio

from qim.cluster.links import GatewayLinks
from qim.stores.registry import NodeInfo


class _Owners:
    def __init__(self) -> None:
        self.listed: list[NodeInfo] = []

    def nodes(self, kind: str) -> list[NodeInfo]:
        return list(self.listed)


class _Link:
    def __init__(self, addr: str) -> None:
        self.addr, self.name = addr, "push"

    async def run(self) -> None:
        await asyncio.sleep(3600)

    async def close(self) -> None:
        pass


def _gw(node_id: str, push: str) -> NodeInfo:
    return NodeInfo("gateway", node_id, "inc", "", push, 10_000, 1)


async def test_on_back_only_for_a_gateway_listed_again_after_a_sync_without_it():
    owners, back = _Owners(), []
    links = GatewayLinks(owners, lambda gw, addr: _Link(addr), on_back=back.append)  # type: ignore[arg-type]
    try:
        owners.listed = [_gw("g1", "a:1"), _gw("g2", "a:2")]
        links.sync()
        links.sync()
        assert back == []  # listed all along
        owners.listed = [_gw("g1", "a:1")]  # g2's lease lapsed
        links.sync()
        assert back == []
        owners.listed = [_gw("g1", "a:1"), _gw("g2", "a:2")]
        links.sync()
        assert back == [links.links["g2"]]  # back: once
        links.sync()
        assert len(back) == 1
        owners.listed = [_gw("g1", "a:1")]
        links.sync()
        owners.listed = [_gw("g1", "a:1"), _gw("g2", "a:9")]  # back on another address: a new link greets
        links.sync()
        assert len(back) == 1 and links.links["g2"].addr == "a:9"
    finally:
        for task in links._tasks.values():
            task.cancel()
        await asyncio.gather(*links._tasks.values(), return_exceptions=True)
