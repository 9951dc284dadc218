"""Configuration from QIM_* environment variables, parsed once into frozen dataclasses,
one module per section: env (typed reads), common, tier (archive tier), tls, registry
(the ShardRegistry: node id, leases), and one per service (writer, gateway, fanout,
mailbox, session, room, archiver). Every value is validated
at start; an invalid one raises ConfigError naming the variable (docs/design.md §11). Names
reuse the seed's where they exist; defaults of addresses come from qim/topology.py."""

from qim.config.archiver import ArchiverConfig
from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.fanout import FanoutConfig
from qim.config.gateway import GatewayConfig
from qim.config.mailbox import MailboxConfig
from qim.config.registry import RegistryConfig
from qim.config.room import RoomConfig
from qim.config.session import SessionConfig
from qim.config.tier import ScyllaConfig, TierConfig
from qim.config.writer import WriterConfig

__all__ = ["ArchiverConfig", "CommonConfig", "Env", "FanoutConfig", "GatewayConfig", "MailboxConfig", "RegistryConfig",
           "RoomConfig", "ScyllaConfig", "SessionConfig", "TierConfig", "WriterConfig"]
