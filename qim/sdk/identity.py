"""Device identity and the store path an app keeps (docs/design.md §9).

An app runs as one device of a user: the token names (tenant, user, device), and the
LocalStore of that user lives at a stable path per (deployment, tenant, user)
under the app's data directory (LocalStore.path_for; tokens never enter the path).
The store remembers its device id, so an app that does not have a device id yet asks
`device_identity()` for the one of its store (a new random 63-bit id the first time)
and then gets a token naming it. Two stores of one device never collide on
client_message_id: each store draws its own nonce (docs/decisions/0016).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Optional

from qim.sdk.gateways import Endpoints, parse_endpoints
from qim.sdk.model import StoreError
from qim.sdk.store import LocalStore

DATA_DIR_ENV = "QIM_DATA_DIR"


@dataclass(frozen=True)
class DeviceIdentity:
    """The device id of a store and the store's path (keep both)."""

    device_id: int
    store_path: str


def default_data_dir(environ=None) -> str:
    """$QIM_DATA_DIR, else $XDG_DATA_HOME/qim, else ~/.local/share/qim."""
    env = os.environ if environ is None else environ
    if env.get(DATA_DIR_ENV):
        return env[DATA_DIR_ENV]
    base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "qim")


def store_path(endpoint: Endpoints, tenant: int, user_id: int, data_dir: Optional[str] = None,
               deployment: Optional[str] = None) -> str:
    """The stable store path of (deployment, tenant, user) under `data_dir`
    (default_data_dir() when None). The deployment is `deployment` (a name the app
    keeps for its whole service), else the first of the gateway endpoints: never the
    gateway a connection happens to use (docs/decisions/0082). ValueError for an
    endpoint without host:port."""
    first = parse_endpoints(endpoint)[0]
    return LocalStore.path_for(data_dir or default_data_dir(), deployment or first, tenant, user_id)


def open_store(path: str, tenant: int, user_id: int, device_id: int) -> LocalStore:
    """Open (or create) the store for this device. StoreError naming both device ids
    when the store at `path` belongs to another device of the user, and (decision 0081)
    when it was copied from another machine, where it is this device."""
    if path == ":memory:" or not os.path.exists(path):
        return LocalStore.open(path, tenant, user_id, device_id)
    try:
        return LocalStore.open(path, tenant, user_id, device_id)
    except StoreError as exc:
        if exc.stored_device is None or exc.stored_device == device_id:
            raise
        raise StoreError(f"the store {path} belongs to device {exc.stored_device}, not {device_id}: use a token "
                         f"for device {exc.stored_device} or another data directory") from None


async def device_identity(endpoint: Endpoints, tenant: int, user_id: int, data_dir: Optional[str] = None,
                          device_id: Optional[int] = None, deployment: Optional[str] = None) -> DeviceIdentity:
    """The device id of the user's store under `data_dir`, creating the store (with
    `device_id`, or a random one) when it does not exist. StoreError when it exists
    with another device id than `device_id`."""
    path = store_path(endpoint, tenant, user_id, data_dir, deployment)

    def run() -> DeviceIdentity:
        if device_id is not None:
            store = open_store(path, tenant, user_id, device_id)
        else:
            store = LocalStore.open(path, tenant, user_id)
        try:
            return DeviceIdentity(store.device_id, path)
        finally:
            store.close()

    return await asyncio.to_thread(run)
