"""`qimctl trace` on a deployment whose mailboxes are in CQL (QIM_MAILBOX_STORE=cql,
docs/decisions/0102): each dispatch record's shard watermark (the top frontier row) and
dispatch identity, read through the CQL MailboxStore's own rows. Reads only."""

from __future__ import annotations

import asyncio
from typing import Mapping, Optional, Sequence

from qim.config.env import Env
from qim.config.tier import TierConfig
from qim.errors import ConfigError, EngineError
from qim.stores.errors import StorageError


def cql_progress(environ: Mapping[str, str], items: Sequence[tuple[int, bytes]],
                 timeout: float) -> dict[tuple[int, bytes], tuple[Optional[bytes], Optional[bytes], bool]]:
    """(shard, dispatch_id) -> (W blob or None, first mailbox_seq bytes or None, DONE: the
    frontier reached the dispatch's first offset). ConfigError without QIM_SCYLLA_ADDRS;
    EngineError when the cluster does not answer within `timeout` s."""
    scylla = TierConfig.from_env(Env(dict(environ))).scylla
    if scylla is None:
        raise ConfigError("QIM_MAILBOX_STORE=cql needs QIM_SCYLLA_ADDRS")

    async def read() -> dict:
        from qim.stores.cql.frontier import FrontierRows
        from qim.stores.cql.session import CqlSession

        session = CqlSession(scylla)
        try:
            rows = FrontierRows(session)
            out = {}
            for shard in sorted({s for s, _ in items}):
                top = await rows.top(shard)
                idents = await rows.identities(shard, [d for s, d in items if s == shard])
                for s, d in items:
                    if s == shard:
                        ident = idents.get(d)
                        done = ident is not None and top is not None and ident.first_offset <= top.offset
                        out[(s, d)] = (top.blob if top else None, ident.seq if ident else None, done)
            return out
        finally:
            await session.close()

    try:
        return asyncio.run(asyncio.wait_for(read(), timeout))
    except (StorageError, asyncio.TimeoutError) as exc:
        raise EngineError(f"CQL at {','.join(scylla.hosts)}:{scylla.port}: {exc or 'no answer'}") from None
