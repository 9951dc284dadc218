"""`qim-dev stack up` restarts a running stack when any moderation variable changed, not
only QIM_SEND_POLICY (issue 38, what a newcomer found): every QIM_MODERATION_* and
QIM_WEBHOOK_* row of the variables table (qim/config/variables.py) is passed to the
services, recorded in stack.env and compared, and the restart line names what changed
without printing a secret."""

from __future__ import annotations

from qim.config.variables import variables
from qim.dev.stack_cli import POLICY, POLICY_VARS, policy_differs, policy_settings, restart_words
from tests.dev.test_stack_policy import Running

HOOK = {POLICY: "qim.policy.webhook:policy", "QIM_MODERATION_WEBHOOK_URL": "https://127.0.0.1:9443/verdict",
        "QIM_MODERATION_WEBHOOK_SECRET": "a-secret-of-sixteen+", "QIM_WEBHOOK_FAIL_POLICY": "closed"}


def test_every_moderation_row_of_the_table_is_a_policy_setting():
    table = {n for n in variables() if n.startswith(("QIM_MODERATION_WEBHOOK_", "QIM_MODERATION_NOTIFY_"))}
    assert {"QIM_MODERATION_WEBHOOK_URL", "QIM_MODERATION_WEBHOOK_SECRET", "QIM_MODERATION_NOTIFY_URL"} <= table
    assert table | {"QIM_WEBHOOK_FAIL_POLICY", "QIM_MODERATION_SYNC_TIMEOUT_MS", POLICY} <= set(POLICY_VARS)
    assert not [n for n in POLICY_VARS if n.endswith(("_LISTEN", "_ADDRS"))]  # the stack's own rows
    got = policy_settings({**HOOK, "QIM_MODERATION_NOTIFY_URL": "", "QIM_REDIS_ADDR": "x", "HOME": "/h"})
    assert got == HOOK  # passed to the services and recorded; unset and empty ones are not


def test_a_changed_webhook_url_secret_or_fail_policy_restarts_the_stack():
    for name, value in (("QIM_MODERATION_WEBHOOK_URL", "https://127.0.0.1:9444/verdict"),
                        ("QIM_MODERATION_WEBHOOK_SECRET", "another-secret-16+"),
                        ("QIM_WEBHOOK_FAIL_POLICY", "open"), ("QIM_MODERATION_SYNC_TIMEOUT_MS", "800"),
                        ("QIM_MODERATION_NOTIFY_URL", "https://127.0.0.1:9445/notify")):
        wanted = {**HOOK, name: value}
        assert policy_differs(HOOK, wanted), name
        line = restart_words(Running.stack(HOOK), {}, wanted)
        assert line.startswith("stack: restarting every service for other moderation settings ("), line
        assert f"{name} changed" in line if "SECRET" in name else f"{name} {HOOK.get(name) or 'unset'} -> {value}" in line
        assert "another-secret-16+" not in line and "a-secret-of-sixteen+" not in line
    assert not policy_differs({**HOOK, "QIM_REDIS_ADDR": "x", "QIM_MODERATION_METRICS_LISTEN": "127.0.0.1:1"}, HOOK)
    assert policy_differs(HOOK, {POLICY: HOOK[POLICY]})  # the webhook settings dropped: restarted without them
