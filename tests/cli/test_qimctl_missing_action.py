"""qimctl with a command but no action (`qimctl moderation`): exit 2 and an error that
lists what may follow, never the internal argparse dest ("required: moderation",
"required: redis_command") that a newcomer cannot act on."""

from __future__ import annotations

import pytest

from qim.cli.qimctl import main

CASES = {
    (): "qimctl: error: the following arguments are required: {audit,membership,message,token,group,schema,"
        "retention,backup,restore,trace,shards,redis,moderation}",
    ("moderation",): "qimctl moderation: error: the following arguments are required: "
                     "{replay,ban,unban,log,mute,unmute,mutes,reports,resolve}",
    ("redis",): "qimctl redis: error: the following arguments are required: "
                "{move-shard,pin-shards,move-bucket,pin-buckets,where}",
    ("audit",): "qimctl audit: error: the following arguments are required: {dispatch,archive,media}",
    ("membership",): "qimctl membership: error: the following arguments are required: {add,remove}",
}


@pytest.mark.parametrize("argv", list(CASES), ids=lambda a: " ".join(a) or "(none)")
def test_a_missing_action_lists_the_choices(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == CASES[argv]


def test_the_usage_line_still_lists_the_actions(capsys):
    with pytest.raises(SystemExit):
        main(["moderation", "--help"])
    out = capsys.readouterr().out
    assert "{replay,ban,unban,log,mute,unmute,mutes,reports,resolve}" in out.splitlines()[1]
