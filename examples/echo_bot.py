"""A long-running bot: loop on the client's events, answer what others write, skip its
own messages, stop cleanly on Ctrl+C (or SIGTERM) without a traceback (docs/sdk.md
"A long-running bot").

    python examples/echo_bot.py --user 2000   runs until Ctrl+C; write to it from
                                              qim-desktop: /dm 2000
    python examples/echo_bot.py               shows itself: a friend writes twice, gets
                                              two answers, then Ctrl+C is pressed for it

(after: set -a; . .qim/stack/stack.env; set +a). Keep the data directory (QIM_DATA_DIR)
between runs: the store remembers what the bot already received, so a restart answers
nothing twice and picks up what was written while it was away.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile

from _common import check, endpoint, fresh_users, token

from qim.consts import MESSAGE_TYPE_TEXT
from qim.errors import QimError
from qim.sdk import Client, ConnectionState, MessagesAdded


async def answer(bot: Client) -> None:
    """The bot's loop: one event at a time, for as long as it runs."""
    while True:
        event = await bot.events.get()
        if isinstance(event, ConnectionState):
            print(f"bot: {event.state}{': ' + event.reason if event.reason else ''}", flush=True)
            if event.state in ("offline", "kicked"):  # stopped for good: the app must end or sign in again
                return
        elif isinstance(event, MessagesAdded):
            for m in event.messages:
                # its own messages come back too (sent from here or another device of the bot),
                # and group notices are CONTROL messages: answer other people's text only
                if m.sender_id == bot.user_id or m.message_type != MESSAGE_TYPE_TEXT:
                    continue
                text = m.body.decode("utf-8", "replace")
                try:
                    # wait=False: stored as pending and sent by the SDK (resent after a
                    # reconnect), so the loop never stalls on one ACK
                    await bot.send_text(m.conversation_id, f"echo: {text}", wait=False)
                    await bot.mark_read(m.conversation_id)
                except QimError as exc:  # one refused answer (a group it left, ...) is told, not fatal
                    print(f"bot: could not answer {m.sender_id}: {exc.code.name}: {exc}", file=sys.stderr,
                          flush=True)
                    continue
                print(f"bot: answered {m.sender_id}: {text!r}", flush=True)


async def run(bot: Client, until: asyncio.Future) -> int:
    """Run the loop until a signal (`until` gets its name) or the client stops; 0 on a
    signal, 1 when the client went offline or was kicked."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # no KeyboardInterrupt: the loop ends in order
        loop.add_signal_handler(sig, lambda s=sig: until.done() or until.set_result(s.name))
    worker = asyncio.create_task(answer(bot))
    await asyncio.wait({worker, until}, return_when=asyncio.FIRST_COMPLETED)
    worker.cancel()
    (failed,) = await asyncio.gather(worker, return_exceptions=True)
    await bot.close()  # pending answers stay in the store and go out at the next start
    if isinstance(failed, Exception):  # a fault of the bot itself: said, never swallowed
        print(f"bot: stopped by an error: {failed!r}", file=sys.stderr, flush=True)
        return 1
    if not until.done():
        print(f"bot: stopped: the client is {bot.state}", flush=True)
        return 1
    print(f"bot: stopped by {until.result()}", flush=True)
    return 0


async def main(user: int, data_dir: str) -> int:
    """The bot as `user`; until Ctrl+C."""
    bot = await Client.open(endpoint(), token(user, 1), data_dir=data_dir)
    await bot.connect()
    print(f"bot: user {bot.user_id} listening; Ctrl+C stops it", flush=True)
    return await run(bot, asyncio.get_running_loop().create_future())


async def show(data_dir: str) -> int:
    """The bot and a friend in one process; Ctrl+C is pressed for the person at the end."""
    bot_id, friend_id = fresh_users(2)
    bot = await Client.open(endpoint(), token(bot_id, 1), data_dir=data_dir)
    friend = await Client.open(endpoint(), token(friend_id, 1), data_dir=data_dir, event_queue=False)
    await bot.connect()
    await friend.connect()
    until = asyncio.get_running_loop().create_future()
    running = asyncio.create_task(run(bot, until))
    chat = (await friend.open_direct(bot_id)).conversation_id
    for text in ("hello bot", "你好 🤖"):
        await friend.send_text(chat, text)
    for _ in range(300):  # the two answers arrive in the friend's store (up to 30 s)
        answers = [m.body.decode() for m in await friend.messages(chat) if m.sender_id == bot_id]
        if len(answers) == 2:
            break
        await asyncio.sleep(0.1)
    print(f"friend got: {answers}")
    check(answers == ["echo: hello bot", "echo: 你好 🤖"], "two answers, in order")
    os.kill(os.getpid(), signal.SIGINT)  # as Ctrl+C in the bot's terminal
    code = await running
    await friend.close()
    return code


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="an echo bot on qim.sdk (docs/sdk.md \"A long-running bot\")")
    parser.add_argument("--user", type=int, help="the bot's user id (default: show itself with a friend)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = os.environ.get("QIM_DATA_DIR") or tmp
        sys.exit(asyncio.run(main(args.user, where) if args.user else show(where)))
