/**
 * How the store applies what the server says (a port of qim.sdk.apply and the list
 * half of qim.sdk.conversations). Only MAILBOX_BATCH entries and HISTORY_BATCH items
 * carry whole bodies and reach the store; PUSH_EVENTS only as the MAILBOX_BATCH page an
 * inline push stands for (its cursor check passed, bodies inline: puller.ts, decision
 * 0156), never session heads (their body may be cut). Every function runs inside the
 * caller's transaction and returns what changed, so the app is told only after the commit.
 * Recall and delete are final: a recalled row never turns NORMAL again.
 */

import { fromBinary } from "@bufbuild/protobuf";
import { ControlEventSchema, MembershipChange_Kind as Kind } from "../gen/qim/v1/message_pb";
import type { MailboxEntry } from "../gen/qim/v1/mailbox_pb";
import type { HistoryItem } from "../gen/qim/v1/history_pb";
import type { SessionEntry } from "../gen/qim/v1/session_pb";
import { equalBytes, seqKey, toHex } from "./bytes";
import { KIND_GROUP } from "./ids";
import type { ApplyResult, Resolved, StoredMessage } from "./model";
import { editOf, extrasOf, olderThanStored } from "./extras";
import { EventType, MessageState, MessageType } from "./protocol";
import { StoreError } from "./errors";
import type { MessageRow, Tx } from "./storedb";
import { headOf, ListTx } from "./storelist";
import { clearQuotes, indexed, quoteAsStored } from "./quotes";

const NOTICE_STATES: Record<number, number> = { [EventType.RECALL]: MessageState.RECALLED,
  [EventType.DELETE]: MessageState.DELETED };

function rowOf(m: StoredMessage): MessageRow {
  return indexed({ ...m, id: toHex(m.messageId), conv: toHex(m.conversationId), seqKey: seqKey(m.conversationSeq) });
}

/** Store a full copy: "inserted", "updated" (state or body differed) or "" (nothing). */
async function upsert(tx: Tx, m: StoredMessage): Promise<string> {
  const store = tx.objectStore("messages");
  const old = await store.get(toHex(m.messageId));
  if (!old) {
    await store.put(rowOf(m));
    return "inserted";
  }
  if (olderThanStored(old, m)) return ""; // an older copy after a newer edit (decision 0120)
  const sameExtras = (old.version ?? 0) === (m.version ?? 0) && (old.reply ?? null) !== null === (m.reply != null);
  if ((old.state === m.state && equalBytes(old.body, m.body) && sameExtras) || (old.state !== MessageState.NORMAL &&
      m.state === MessageState.NORMAL)) return "";
  await store.put(indexed({ ...old, state: m.state, body: m.body, reply: m.reply ?? old.reply,
    mentions: m.mentions ?? old.mentions, mentionAll: m.mentionAll ?? old.mentionAll, version: m.version ?? old.version,
    editedAtMs: m.editedAtMs ?? old.editedAtMs }));
  return "updated";
}

/** Our own committed message carries its cmid: the pending row becomes committed. */
async function resolveOwn(tx: Tx, userId: bigint, m: StoredMessage): Promise<Resolved | null> {
  if (!m.clientMessageId || m.senderId !== userId) return null;
  const store = tx.objectStore("pending");
  const p = await store.get(toHex(m.clientMessageId));
  if (!p || p.state === "committed") return null;
  await store.put({ ...p, state: "committed", messageId: m.messageId, conversationSeq: m.conversationSeq });
  return { clientMessageId: m.clientMessageId, messageId: m.messageId, conversationId: m.conversationId,
    conversationSeq: m.conversationSeq, createdAtMs: m.createdAtMs };
}

async function record(list: ListTx, given: StoredMessage, out: ApplyResult): Promise<void> {
  const m = await quoteAsStored(list.tx, given);
  const outcome = await upsert(list.tx, m);
  if (outcome === "inserted") out.inserted.push(m);
  else if (outcome === "updated") out.updated.push(m);
  if (outcome) await list.noteMessage(m);
  if (outcome && m.state !== MessageState.NORMAL) {  // a removed copy (a history read): its quotes go too
    for (const reply of await clearQuotes(list.tx, m.messageId, m.state)) out.updated.push(reply);
  }
  const r = await resolveOwn(list.tx, list.userId, m);
  if (r) out.resolved.push(r);
}

/** An EDIT notice (decision 0120): an older NORMAL copy takes the new body and version. */
async function applyEdit(tx: Tx, body: Uint8Array): Promise<StoredMessage | null> {
  const edit = editOf(body);
  if (!edit) return null;
  const store = tx.objectStore("messages");
  const old = await store.get(toHex(edit.messageId));
  if (!old || old.state !== MessageState.NORMAL || (old.version ?? 0) >= edit.version) return null;
  const row = { ...old, body: edit.body, version: edit.version, editedAtMs: edit.editedAtMs };
  await store.put(row);
  return row;
}

/** A recall/delete notice: the stored copy loses its body and takes the state; the
 * stored replies quoting it lose its text (quotes.ts). The rows changed, the target first. */
async function setState(tx: Tx, messageId: Uint8Array, state: number): Promise<StoredMessage[]> {
  const store = tx.objectStore("messages");
  const old = await store.get(toHex(messageId));
  const changed: StoredMessage[] = [];
  if (old && !(old.state === state && old.body.length === 0)) {
    const row = { ...old, state, body: new Uint8Array(0) };
    await store.put(row);
    changed.push(row);
  }
  return [...changed, ...await clearQuotes(tx, messageId, state)];  // also when the target was never stored here
}

function control(body: Uint8Array) {
  try {
    return fromBinary(ControlEventSchema, body);
  } catch {
    return null; // a garbled notice must not wedge the cursor on this entry for ever
  }
}

/** A CONTROL entry: the newest message of its conversation; our own membership moves the interval. */
async function noteControl(list: ListTx, e: MailboxEntry): Promise<void> {
  if (e.conversationId.length !== 16 || e.conversationId.every((x) => x === 0)) return;
  const ev = e.eventType === EventType.MEMBERSHIP ? control(e.body) : null;
  const change = ev?.event.case === "membership" ? ev.event.value : null;
  const retitle = ev?.event.case === "titleChange" ? ev.event.value : null;
  const r = await list.row(e.conversationId, 0n, change?.groupId ?? retitle?.groupId ?? 0n);
  if (!r) return;
  list.advanceHead(r, headOf(e.messageId, e.conversationSeq, e.senderId, e.createdAtMs, MessageType.CONTROL, e.body,
    MessageState.NORMAL));
  if (retitle) r.title = retitle.title; // the owner renamed the group ("" removes the title)
  if (!change) return;
  if (change.kind === Kind.CREATED && change.title) r.title = change.title;
  list.membership.push({ conversationId: e.conversationId, groupId: change.groupId, conversationSeq: e.conversationSeq,
    kind: change.kind, users: [...change.users], actorUserId: change.actorUserId });
  if (!change.users.includes(list.userId)) return;
  if (change.kind === Kind.CREATED || change.kind === Kind.JOINED) {
    r.joinedAt = change.kind === Kind.CREATED ? 0n : e.conversationSeq - 1n;
    r.leftAt = 0n;
  } else if (change.kind === Kind.LEFT || change.kind === Kind.REMOVED) r.leftAt = e.conversationSeq;
}

/** MAILBOX_BATCH entries in mailbox order (the cursor is written by the caller, same tx). */
export async function applyMailboxEntries(list: ListTx, entries: MailboxEntry[], out: ApplyResult): Promise<void> {
  for (const e of entries) {
    if (e.eventType === EventType.EDIT) {
      const changed = await applyEdit(list.tx, e.body);
      if (changed) {
        out.updated.push(changed);
        await list.noteMessage(changed);
      }
      continue;
    }
    if (e.eventType in NOTICE_STATES) {
      const ev = control(e.body);
      const change = ev?.event.case === "stateChange" ? ev.event.value : null;
      if (change && change.messageId.length) {
        for (const changed of await setState(list.tx, change.messageId, change.state || NOTICE_STATES[e.eventType])) {
          out.updated.push(changed);
          await list.noteMessage(changed);
        }
      }
      await noteControl(list, e);
      continue;
    }
    if (e.eventType !== EventType.MESSAGE) {
      await noteControl(list, e);
      continue;
    }
    const normal = e.state === MessageState.NORMAL;
    await record(list, { messageId: e.messageId, conversationId: e.conversationId, conversationSeq: e.conversationSeq,
      senderId: e.senderId, createdAtMs: e.createdAtMs, messageType: e.messageType, customType: e.customType,
      body: normal ? e.body : new Uint8Array(0), clientMessageId: e.clientMessageId.length ? e.clientMessageId : null,
      mailboxSeq: e.mailboxSeq, state: e.state, ...extrasOf(e) }, out);
  }
  ordered(out);
}

/** HISTORY_BATCH items of one conversation; a NORMAL item without its body is refused. */
export async function applyHistoryItems(list: ListTx, conv: Uint8Array, items: HistoryItem[],
  out: ApplyResult): Promise<void> {
  for (const it of items) {
    if (it.messageType === MessageType.CONTROL) continue;
    const normal = it.state === MessageState.NORMAL;
    if (normal && !it.bodyIncluded) {
      throw new StoreError(`history item at conversation_seq ${it.conversationSeq} came without its body`);
    }
    await record(list, { messageId: it.messageId, conversationId: conv, conversationSeq: it.conversationSeq,
      senderId: it.senderId, createdAtMs: it.createdAtMs, messageType: it.messageType, customType: it.customType,
      body: normal ? it.body : new Uint8Array(0), clientMessageId: it.clientMessageId.length ? it.clientMessageId : null,
      mailboxSeq: 0n, state: it.state, ...extrasOf(it) }, out);
  }
  ordered(out);
}

/** A server SessionEntry (absolute values): snapshot, interval, read position, head, title. */
export async function applySessionEntry(list: ListTx, e: SessionEntry): Promise<void> {
  const r = await list.row(e.conversationId, e.peerUserId, e.groupId);
  if (!r) return;
  if (r.kind === KIND_GROUP) r.title = e.groupTitle; // absolute, as every field of an entry
  const head = e.lastMessage;
  Object.assign(r, { srvReadSeq: e.readConversationSeq, srvHeadSeq: head ? head.conversationSeq : 0n,
    srvUnread: e.unread, srvExact: e.unreadExact, complete: false, joinedAt: e.joinedAt, leftAt: e.leftAt });
  list.moveRead(r, e.readConversationSeq, true);
  if (head) {
    list.advanceHead(r, headOf(head.messageId, head.conversationSeq, head.senderId, head.createdAtMs, head.messageType,
      head.body, head.state, head.bodyIncluded));
  }
}

/** Per conversation in conversation_seq order, so the app never sees one out of order. */
function ordered(out: ApplyResult): void {
  const first = new Map<string, number>();
  for (const m of out.inserted) if (!first.has(toHex(m.conversationId))) first.set(toHex(m.conversationId), first.size);
  out.inserted.sort((a, b) => {
    const d = first.get(toHex(a.conversationId))! - first.get(toHex(b.conversationId))!;
    return d || (a.conversationSeq < b.conversationSeq ? -1 : a.conversationSeq > b.conversationSeq ? 1 : 0);
  });
}
