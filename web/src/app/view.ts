/**
 * The signed-in page: conversation list (title, last message, unread badge), the open
 * conversation (rows keyed by client_message_id: pending → sent → failed, recalled;
 * paging back through history), the composer, groups and their members. Everything
 * shown comes from qim-js events and the store; nothing is added from a call's return
 * value, so a send is one row whatever arrives first.
 */

import { fromHex, fromUtf8, parseU64, toHex, utf8 } from "../sdk/bytes";
import type { Client } from "../sdk/client";
import type { QimEvent } from "../sdk/events";
import { KIND_GROUP } from "../sdk/ids";
import type { Conversation } from "../sdk/model";
import { MessageType } from "../sdk/protocol";
import { controlPreview, mediaWords } from "./notices";
import { Attach } from "./attach";
import { mediaParts } from "./mediaview";
import { StorageTrouble } from "../sdk/errors";
import { convControls, readMark, shapeList } from "./convmarks";
import { loadReactions, noteReaction, reactionBar, typed, typingWords } from "./reactview";
import { Rows, type Row } from "./rows";
import { editLink, refused } from "./refused";
import { reportLink } from "./reportview";
import { completeMentions, msgActions, quoteOf, submitDraft } from "./replyedit";
import { storageWords, tooLongWords } from "./words";

const OPEN_KEY = "qim.open"; // sessionStorage: the conversation open in this tab (a reload comes back to it)

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

function el(tag: string, cls: string, text = "", attrs: Record<string, string> = {}): HTMLElement {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text) e.textContent = text;
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

/** The page of one signed-in client. */
export class ChatView {
  private convs = new Map<string, Conversation>();
  private open: string | null = null;
  private rows: Rows | null = null;
  private names = new Map<string, string>();
  private pendingRender = false;
  private wanted = new Set<bigint>(); // user ids drawn without a known name
  private off: () => void;
  private attach: Attach; // attach button, drop, paste and pending uploads (attach.ts)

  constructor(private readonly client: Client, private readonly showError: (m: string) => void) {
    if (client.claims.name) this.names.set(String(client.userId), client.claims.name);
    this.off = client.on((e) => this.onEvent(e));
    this.bindForms();
    this.attach = new Attach(client, () => this.open, showError);
  }

  /** Stop listening (sign out, re-login). */
  dispose(): void {
    this.off();
  }

  /** Open again the conversation this tab showed before a reload (sessionStorage). */
  async restore(): Promise<void> {
    const id = sessionStorage.getItem(OPEN_KEY);
    if (id && (this.convs.has(id) || (await this.client.conversation(fromHex(id))))) await this.openConversation(id);
  }

  /** Fill the list from the store (before and while connecting). */
  async load(): Promise<void> {
    for (const c of await this.client.conversations()) this.convs.set(toHex(c.conversationId), c);
    this.renderList();
  }

  private nameOf(user: bigint): string {
    const name = this.names.get(String(user));
    if (name === undefined) this.wanted.add(user);
    return name || `user ${user}`;
  }

  /** Ask the server for the names of `users` not known yet (PULL_PROFILES), then redraw. */
  private async learnNames(users: bigint[]): Promise<void> {
    if (!this.client.runtime.connected) return; // asked again on the next draw
    try {
      for (const [u, name] of await this.client.displayNames(users)) this.names.set(String(u), name);
    } catch (e) {
      this.showError(`names: ${(e as Error).message}`);
    }
  }

  private askNames(): void {
    const users = [...this.wanted];
    this.wanted.clear();
    if (!users.length) return;
    void this.learnNames(users).then(() => {
      if (users.some((u) => this.names.get(String(u)))) this.schedule();
    });
  }

  private titleOf(c: Conversation): string {
    if (c.title) return c.title;
    return c.kind === KIND_GROUP ? `group ${c.groupId}` : this.nameOf(c.peerUserId);
  }

  private onEvent(e: QimEvent): void {
    const rows = this.rows;
    switch (e.type) {
      case "conversations":
        for (const c of e.conversations) this.convs.set(toHex(c.conversationId), c);
        break;
      case "messagesAdded":
      case "messagesUpdated":
        for (const m of e.messages) rows?.message(m);
        if (e.type === "messagesAdded" && this.open && e.messages.some((m) => toHex(m.conversationId) === this.open
          && m.senderId !== this.client.userId)) void this.markRead();
        break;
      case "messagesRemoved":
        rows?.removed(e.messageIds);
        break;
      case "sendPending":
        rows?.pending(e.pending);
        break;
      case "pendingResolved":
        for (const a of e.acks) rows?.acked(a);
        break;
      case "sendFailed": // its text back into an empty composer, else an "edit" link (refused.ts)
        rows?.failed(e.clientMessageId, e.message);
        refused(rows?.list().find((r) => r.key === toHex(e.clientMessageId)), e.clientMessageId);
        break;
      case "membership":
        if (this.open === toHex(e.change.conversationId) && !$("members").hidden) void this.showMembers();
        break;
      case "reactions": // under the message; "typing…" in the header (reactview.ts)
        noteReaction(e.messageId, e.summary);
        break;
      case "state": // (re)connected: the open chat's reactions, unread while offline
        if (e.state === "ready" && this.open) void loadReactions(this.client, fromHex(this.open), this.showError)
          .then(() => this.schedule());
        break; // redraw: a pending row says "not sent yet" while offline; names unknown offline are asked now
      case "typing":
      case "conversationState": // pin, mute, hide, mention marks; a read tick (convmarks.ts)
      case "peerRead":
        break;
      case "syncFailed":
        this.showError(`sync failed: ${e.message}`);
        break;
      default:
        return;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.pendingRender) return;
    this.pendingRender = true;
    queueMicrotask(() => {
      this.pendingRender = false;
      this.renderList();
      this.renderRows(false);
    });
  }

  private renderList(): void {
    const ul = $("convs");
    ul.replaceChildren();
    const list = shapeList(this.client, [...this.convs.values()].sort((a, b) => { // pinned first, hidden out
      const x = a.lastMessage?.createdAtMs ?? 0n, y = b.lastMessage?.createdAtMs ?? 0n;
      return x < y ? 1 : x > y ? -1 : 0;
    }));
    for (const c of list) {
      const id = toHex(c.conversationId);
      const li = el("li", "conv" + (id === this.open ? " open" : ""), "", { "data-testid": "conversation",
        "data-conversation": id, "data-unread": String(c.unread) });
      li.append(el("span", "title", this.titleOf(c), { "data-testid": "conversation-title" }));
      if (c.unread) li.append(el("span", "badge", c.unreadExact ? String(c.unread) : `${c.unread}+`, { "data-testid": "unread-badge" }));
      const last = c.lastMessage;
      let preview = "";
      if (last) {
        if (last.state !== 0) preview = "(message recalled)";
        else if (last.messageType === MessageType.CONTROL) preview = controlPreview(last.body);
        else if (last.messageType === MessageType.MEDIA) preview = `${last.senderId === this.client.userId ? "me" : this.nameOf(last.senderId)}: ${mediaWords(last.body)}`;
        else if (!last.bodyComplete) preview = `${last.senderId === this.client.userId ? "me" : this.nameOf(last.senderId)}: (long message)`;
        else preview = `${last.senderId === this.client.userId ? "me" : this.nameOf(last.senderId)}: ${fromUtf8(last.body)}`;
      }
      li.append(el("span", "last", preview, { "data-testid": "last-message" }), ...convControls(this.client, c, this.showError));
      li.onclick = () => void this.openConversation(id);
      ul.append(li);
    }
    this.askNames();
  }

  private renderRows(scroll: boolean): void {
    if (!this.rows) return;
    const open = this.open ? this.convs.get(this.open) : undefined;
    // names and titles learnt meanwhile; who is typing beside the title, never in it
    if (open) $("chat-title").textContent = this.titleOf(open);
    $("chat-typing").textContent = typingWords(this.client, this.open, (u) => this.nameOf(u));
    const box = $("messages");
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    const ul = $("rows");
    ul.replaceChildren(...this.rows.list().map((r) => this.rowNode(r)));
    this.attach.render();
    if (scroll || atBottom) box.scrollTop = box.scrollHeight;
    this.askNames();
  }

  private rowNode(r: Row): HTMLElement {
    const mine = r.senderId === this.client.userId;
    const li = el("li", "msg" + (mine ? " mine" : ""), "", { "data-testid": "message", "data-key": r.key,
      "data-state": r.state, "data-seq": r.seq === null ? "" : String(r.seq) });
    li.append(el("div", "who", mine ? "me" : this.nameOf(r.senderId), { "data-testid": "message-sender" }),
      ...quoteOf(r, (u) => (u === this.client.userId ? "me" : this.nameOf(u))));
    const text = r.state === "recalled" ? "message recalled" : r.state === "deleted" ? "message deleted" : r.text;
    li.append(...mediaParts(this.client, this.open, r, this.showError), el("div", "text", text, { "data-testid": "message-text" }));
    const meta = el("div", "meta");
    meta.append(el("span", "time", new Date(r.createdAtMs).toLocaleTimeString()));
    const waiting = this.client.runtime.connected ? "sending…" : "not sent yet: offline (sent when back online)";
    const st = r.state === "pending" ? waiting : r.state === "failed" ? `failed: ${r.failure}` : mine && r.state === "sent" ? "✓" : "";  // a tick is for what I sent
    meta.append(el("span", "st", st, { "data-testid": "message-status" }), ...editLink(r, () => this.schedule()),
      ...readMark(this.client, this.open ? this.convs.get(this.open) : undefined, r),
      ...msgActions(r, mine && r.key === this.rows?.list().filter((x) => x.senderId === r.senderId).at(-1)?.key),
      ...reportLink(this.client, this.open, r, this.nameOf(r.senderId)));
    if (mine && r.state === "sent" && r.messageId) {
      const b = el("button", "link", "recall", { "data-testid": "recall" });
      b.onclick = () => void this.recall(r.messageId!);
      meta.append(b);
    }
    li.append(meta, ...reactionBar(this.client, this.open, r, this.showError, () => this.schedule()));
    return li;
  }

  async openConversation(id: string): Promise<void> {
    this.open = id;
    sessionStorage.setItem(OPEN_KEY, id);
    const conv = fromHex(id);
    const rows = (this.rows = new Rows(id, this.client.userId));
    const c = this.convs.get(id) ?? (await this.client.conversation(conv));
    $("chat").hidden = false;
    $("chat-title").textContent = c ? this.titleOf(c) : id;
    $("chat-typing").textContent = "";
    $("chat-title").dataset.conversation = id;
    $("show-members").hidden = !c || c.kind !== KIND_GROUP;
    $("members").hidden = true;
    for (const p of await this.client.unsent(conv)) rows.pending(p);
    try {
      for (const m of await this.client.messages(conv, 0n, 50)) rows.message(m);
    } catch (e) {
      this.showError(`history: ${(e as Error).message}`);
    }
    // before the first connection (a reload restores the open chat first) the "ready" state reads them
    if (this.client.state === "ready") await loadReactions(this.client, conv, this.showError);
    if (this.rows !== rows) return; // another conversation was opened meanwhile
    this.renderList();
    this.renderRows(true);
    await this.markRead();
  }

  private async markRead(): Promise<void> {
    if (!this.open || document.visibilityState !== "visible") return;
    try {
      await this.client.markRead(fromHex(this.open));
    } catch (e) {
      this.showError(`mark read: ${(e as Error).message}`);
    }
  }

  private async olderPage(): Promise<void> {
    if (!this.open || !this.rows) return;
    const rows = this.rows;
    const box = $("messages");
    const before = box.scrollHeight - box.scrollTop;
    const page = await this.client.messages(fromHex(this.open), rows.oldestSeq() || 0n, 30);
    for (const m of page) rows.message(m);
    this.renderRows(false);
    box.scrollTop = box.scrollHeight - before;
    if (!page.length) ($("older") as HTMLButtonElement).textContent = "No older messages";
  }

  private async recall(messageId: string): Promise<void> {
    // a recall cannot be undone and takes the text from everyone: asked once (a newcomer's misclick)
    if (!window.confirm("Recall this message for everyone? This cannot be undone.")) return;
    try {
      await this.client.recall(fromHex(this.open!), fromHex(messageId));
    } catch (e) {
      this.showError(`recall: ${(e as Error).message}`);
    }
  }

  private async showMembers(): Promise<void> {
    const c = this.open ? this.convs.get(this.open) : null;
    if (!c) return;
    const ul = $("members");
    ul.hidden = false;
    try {
      const members = await this.client.members(c.groupId);
      await this.learnNames(members.map((m) => m.userId));
      ul.replaceChildren(...members.map((m) => el("li", "", `${this.nameOf(m.userId)}${m.owner ? " (owner)" : ""}`,
        { "data-testid": "member", "data-user": String(m.userId) })));
    } catch (e) {
      this.showError(`members: ${(e as Error).message}`);
    }
  }

  private bindForms(): void {
    const form = (id: string) => $<HTMLFormElement>(id);
    form("composer").onsubmit = (ev) => {
      ev.preventDefault();
      const ta = form("composer").elements.namedItem("text") as HTMLTextAreaElement;
      if (!this.open || !ta.value) return;
      const text = ta.value;
      const size = utf8(text).length, limit = this.client.runtime.maxBodyBytes;
      if (size > limit) return this.showError(tooLongWords(size, limit)); // the text stays to be shortened
      ta.value = "";
      // the row comes from the sendPending event; the call's own result is not needed here.
      // Refused before it was stored (storage full, a limit): the text goes back to the composer.
      submitDraft(this.client, this.open, text, this.names).catch((e) => {
        if (!ta.value) ta.value = text;
        this.showError(e instanceof StorageTrouble ? `Not sent: ${storageWords(e.kind)}` : `Not sent: ${e.message}`);
      });
    };
    const ta = form("composer").elements.namedItem("text") as HTMLTextAreaElement;
    completeMentions(ta, this.names);
    ta.addEventListener("input", () => typed(this.client, this.open, ta.value));
    ta.onkeydown = (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        form("composer").requestSubmit();
      }
    };
    form("new-chat").onsubmit = (ev) => {
      ev.preventDefault();
      const input = form("new-chat").elements.namedItem("peer") as HTMLInputElement;
      void (async () => {
        try {
          const c = await this.client.openDirect(parseU64(input.value.trim(), 1n, undefined, "user id"));
          input.value = "";
          this.convs.set(toHex(c.conversationId), c);
          await this.openConversation(toHex(c.conversationId));
        } catch (e) {
          this.showError(`chat: ${(e as Error).message}`);
        }
      })();
    };
    form("new-group").onsubmit = (ev) => {
      ev.preventDefault();
      const f = form("new-group");
      const members = (f.elements.namedItem("members") as HTMLInputElement).value.split(/[\s,]+/).filter(Boolean);
      const title = (f.elements.namedItem("title") as HTMLInputElement).value.trim();
      void (async () => {
        try {
          const c = await this.client.createGroup(members.map((m) => parseU64(m, 1n, undefined, "member id")), undefined, title);
          f.reset();
          this.convs.set(toHex(c.conversationId), c);
          await this.openConversation(toHex(c.conversationId));
          await this.showMembers();
        } catch (e) {
          this.showError(`group: ${(e as Error).message}`);
        }
      })();
    };
    $("older").onclick = () => void this.olderPage();
    $("show-members").onclick = () => void this.showMembers();
  }
}
