"""librdkafka's own debug log, for an operator chasing a client-side problem.

`QIM_KAFKA_DEBUG` (e.g. `broker,topic,metadata,fetch`) is passed as librdkafka's `debug`
setting to every producer, consumer and offset client of the services' Kafka bridge
(qim/infra/kafka: not the one-off metadata clients nor qimctl's); librdkafka
then writes its contexts to the process's stderr (the service log). Unset: no debug
(the default; a debug log costs CPU and fills disks). docs/operations.md, "Brokers".
"""

from __future__ import annotations

import os
from typing import Any

DEBUG_ENV = "QIM_KAFKA_DEBUG"


def with_debug(conf: dict[str, Any]) -> dict[str, Any]:
    """`conf` with librdkafka's `debug` contexts from QIM_KAFKA_DEBUG added (the same
    dict, changed in place, returned for chaining); unchanged when the variable is unset
    or empty. An unknown context makes librdkafka refuse the configuration
    (KafkaException at client creation): a typo fails at start, not silently."""
    contexts = os.environ.get(DEBUG_ENV, "").strip()
    if contexts:
        conf["debug"] = contexts
    return conf
