"""What qim-desktop's slash commands do (parsed by qim/desktop/commands.py).

Every command ends with one line in the notice area: what was done ("loaded 30 older
messages", "marked read"), or why nothing was (a refusal naming the mistake). A
refusal raises Refused; the app keeps the typed text in the composer then.
"""

from __future__ import annotations

from typing import Any, Optional

from qim.desktop import commands, marks, media, reacts, refused, render, replies, reports, rooms

# `app` below is the ChatApp (qim/desktop/app.py): its client, convs, current, shown and
# names, and its tell / open_chat / learn_names / action_* methods. Typed loosely so this
# module does not import the screen that imports it.
ChatApp = Any
MEDIA = ("attach", "save")


class Refused(Exception):
    """A command that cannot run as typed (the message is the one-line refusal)."""


async def run(app: ChatApp, cmd: commands.Command) -> None:
    """Run one parsed command against the app's client. Refused, or the SDK's errors
    (QimError, ValueError) for the app to show."""
    c = app.client
    conv = app.convs.get(app.current) if app.current else None
    if cmd.name == "quit":
        await app.action_leave_app()
    elif cmd.name == "help":
        app.tell(commands.HELP.rstrip() + "\n" + commands.KEYS, lines=True)
    elif cmd.name == "dm":
        if cmd.ids[0] == c.user_id:
            raise Refused(f"{cmd.ids[0]} is your own user id: /dm takes another user's id")
        await app.open_chat((await c.open_direct(cmd.ids[0])).conversation_id)
        await app.learn_names([cmd.ids[0]])
        app.tell(dm_note(cmd.ids[0], app.names))
    elif cmd.name == "group":
        others = [u for u in cmd.ids if u != c.user_id]
        if not others:
            raise Refused("a group needs at least one other user: /group USER [USER...] [NAME]")
        group = await c.create_group(others, title=cmd.text)
        await app.open_chat(group.conversation_id)
        app.tell(f"created {render.conversation_name(group)} with {', '.join(map(str, others))}")
    elif cmd.name == "join":
        await rooms.join(app, cmd.ids[0])
    elif cmd.name == "receipts":
        on = await c.set_read_receipts(cmd.text == "on")
        app.tell("read receipts on: others see ✓✓ when you read, you see theirs" if on else
                 "read receipts off: nobody sees when you read, and you see nobody's")
    elif cmd.name == "edit" and not cmd.text:
        if not refused.edit(app):
            raise Refused("no refused message to edit (a refused text goes back into an empty composer by itself)")
    elif cmd.name == "leave" and app.room is not None:
        await rooms.leave(app)
    elif app.room is not None and cmd.name in ("read", "members", "title", "recall", "older", "report", *MEDIA,
                                               *marks.COMMANDS, *reacts.COMMANDS):
        raise Refused(f"/{cmd.name} works in a chat, not in a room (open a chat on the left)")
    elif cmd.name == "older":
        await app.action_older()
    elif conv is None:
        raise Refused(f"/{cmd.name} needs an open chat: /dm USER, or pick one on the left (Tab, ↑ ↓, Enter)")
    elif cmd.name == "read":
        if not app.shown:
            app.tell("nothing to mark read yet")
            return
        await c.mark_read(conv.conversation_id)
        app.tell("marked read")
    elif cmd.name in reacts.COMMANDS:
        try:
            app.tell(await reacts.run(app, conv, cmd.name, cmd.text, cmd.ids[0] if cmd.ids else 1))
        except ValueError as exc:  # a bad emoji (the SDK's check) or no such message
            raise Refused(str(exc)) from None
    elif cmd.name in MEDIA:  # qim/desktop/media.py (issue 40)
        try:
            app.tell(await (media.attach(app, conv, cmd.text) if cmd.name == "attach"
                            else media.save(app, cmd.ids[0], cmd.text)))
        except ValueError as exc:  # no service, no such file, or the service's refusal and reason
            raise Refused(str(exc)) from None
    elif cmd.name == "report":
        try:
            app.tell(await reports.run(app, conv, cmd.ids[0], cmd.text))
        except ValueError as exc:  # no such message, or text the SDK refuses
            raise Refused(str(exc)) from None
    elif cmd.name in marks.COMMANDS:
        app.tell(await marks.run(c, conv, cmd.name, cmd.ids[0] if cmd.ids else 0, app.names))
    elif cmd.name in ("leave", "members", "title") and not conv.is_group:
        raise Refused(f"/{cmd.name} works in a group chat")
    elif cmd.name == "leave":
        if not conv.is_member:
            raise Refused("you already left this group")
        await c.leave_group(conv.group_id)
        app.tell(f"you left {render.conversation_name(conv)}")
    elif cmd.name == "title":
        await c.set_group_title(conv.group_id, cmd.text)
        app.tell(f'group renamed "{cmd.text}"')
    elif cmd.name == "members":
        if not conv.is_member:  # the server answers FORBIDDEN: say it in words
            raise Refused("you left this group: only its members can see who is in it")
        members = await c.members(conv.group_id)
        await app.learn_names(m.user_id for m in members)
        app.tell("members: " + ", ".join(f"{render.person(m.user_id, app.names)}{' (owner)' if m.owner else ''}"
                                         for m in members))
    elif cmd.name == "recall":
        await recall(app, cmd.ids[0] if cmd.ids else 1)
    elif cmd.name in ("reply", "edit"):  # qim/desktop/replies.py (decision 0120)
        try:
            app.tell(await (replies.reply(app, cmd.ids[0], cmd.text) if cmd.name == "reply"
                            else replies.edit(app, cmd.text)))
        except ValueError as exc:
            raise Refused(str(exc)) from None


async def recall(app: ChatApp, nth: int) -> None:
    """Recall this person's `nth` newest message shown in the open chat."""
    own = sorted((m for m in app.shown.values() if m.sender_id == app.client.user_id and m.state == 0),
                 key=lambda m: m.conversation_seq, reverse=True)
    if len(own) < nth:
        what = "no message of yours" if not own else f"only {len(own)} message(s) of yours"
        raise Refused(f"{what} here to recall" + ("" if nth == 1 else f" (asked for your {nth}th newest)"))
    target = own[nth - 1]
    await app.client.recall(target.conversation_id, target.message_id)
    app.tell("recalled: " + render.cut(render.body_text(target.message_type, target.custom_type, target.body, 0),
                                       60))


def dm_note(peer: int, names: render.Names) -> str:
    """The notice after /dm. A display name is learned at a user's first sign-in, so a
    peer without one has most likely never signed in: the messages wait in their
    mailbox (delivered when they first connect), which the person is told."""
    if names.get(peer):
        return f"chat with {render.person(peer, names)} open"
    return (f"chat with user {peer} open: {peer} has not signed in yet (or has no display name); "
            "your messages wait for them and arrive when they sign in")


def older_note(count: Optional[int], first: bool = False) -> str:
    """The notice after /older or Ctrl+U (`first`: the conversation's first message is shown)."""
    if count is None:
        return "no chat open"
    loaded = f"loaded {count} older message{'s' if count != 1 else ''}"
    if first:
        return f"{loaded}: the beginning of the conversation" if count else \
            "nothing older: this is the beginning of the conversation"
    return loaded if count else "nothing older could be loaded now (offline?)"
