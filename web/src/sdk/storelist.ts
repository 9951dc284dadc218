/**
 * The device's conversation list inside one store transaction (a port of
 * qim.sdk.conversations; docs/design.md §6, unread and read positions).
 *
 * Unread has one definition: |{m : m.seq > base ∧ m.sender ≠ self ∧ type ≠ CONTROL ∧
 * state = NORMAL}|, base = max(read position, joined_at for groups), never latest −
 * read. Exact while head − base ≤ 200, else 200 and not exact. The local count is
 * exact only when the store holds every such message: the server's snapshot tells
 * (its count over (its base, its head] equals ours: `complete`); until then the
 * server's count plus ours above its head is used while the read position is the one
 * the server counted from, otherwise the local count is a lower bound (unreadExact
 * false). Own messages move the read position to them (sending marks read).
 */

import { fromHex, seqKey, toHex } from "./bytes";
import { conversationKind, KIND_GROUP } from "./ids";
import type { ApplyResult, Conversation, LastMessage, Membership, StoredMessage } from "./model";
import { MessageState, MessageType, SESSION_HEAD_BODY_MAX, UNREAD_EXACT_WINDOW } from "./protocol";
import type { ConvRow, Tx } from "./storedb";

/** A head as stored: the body cut at 4 KiB (bodyComplete false then), like the server's. */
export function headOf(messageId: Uint8Array, seq: bigint, sender: bigint, createdAtMs: bigint, messageType: number,
  body: Uint8Array, state: number, bodyIncluded = true): LastMessage {
  const whole = bodyIncluded && state === MessageState.NORMAL && body.length <= SESSION_HEAD_BODY_MAX;
  return { messageId, conversationSeq: seq, senderId: sender, createdAtMs, messageType,
    body: whole ? body : new Uint8Array(0), bodyComplete: whole, state };
}

function newRow(conv: Uint8Array, kind: number): ConvRow {
  return { id: toHex(conv), conversationId: conv, kind, peerUserId: 0n, groupId: 0n, title: "", joinedAt: 0n,
    leftAt: 0n, readSeq: 0n, readConfirmed: 0n, headSeq: 0n, lastActivityId: null, head: null, srvReadSeq: null,
    srvHeadSeq: 0n, srvUnread: 0, srvExact: false, complete: false, unread: 0, unreadExact: true,
    updatedLocalMs: Date.now() };
}

/** The app's view of a row. */
export function toConversation(r: ConvRow): Conversation {
  return { conversationId: r.conversationId, kind: r.kind, peerUserId: r.peerUserId, groupId: r.groupId,
    title: r.title, readConversationSeq: r.readSeq, unread: r.unread, unreadExact: r.unreadExact,
    lastMessage: r.head, joinedAt: r.joinedAt, leftAt: r.leftAt };
}

/** The list rows one transaction touches, recomputed and written by finish(). */
export class ListTx {
  private rows = new Map<string, ConvRow>();
  private touched = new Set<string>();
  private reads = new Map<string, bigint>();
  readonly membership: Membership[] = [];

  constructor(readonly tx: Tx, readonly userId: bigint) {}

  /** The row of `conv`, created when absent; a peer or group id not known yet is filled. */
  async row(conv: Uint8Array, peer = 0n, groupId = 0n): Promise<ConvRow | null> {
    const id = toHex(conv);
    let r = this.rows.get(id) ?? (await this.tx.objectStore("conversations").get(id)) ?? null;
    if (!r) {
      let kind: number;
      try {
        kind = conversationKind(conv);
      } catch {
        return null; // not a conversation a list can hold
      }
      r = newRow(conv, kind);
    }
    if (r.peerUserId === 0n && peer) r.peerUserId = peer;
    if (r.groupId === 0n && groupId) r.groupId = groupId;
    this.rows.set(id, r);
    this.touched.add(id);
    return r;
  }

  /** Make `head` the head when it is newer (or the head itself changed state). */
  advanceHead(r: ConvRow, head: LastMessage): void {
    const same = r.lastActivityId !== null && toHex(r.lastActivityId) === toHex(head.messageId);
    if (r.headSeq < head.conversationSeq || (r.headSeq === head.conversationSeq && same)) {
      r.headSeq = head.conversationSeq;
      r.lastActivityId = head.messageId;
      r.head = head;
      r.updatedLocalMs = Date.now();
    }
  }

  /** Read position forward only; `confirmed`: the server holds it already. */
  moveRead(r: ConvRow, seq: bigint, confirmed: boolean): void {
    if (seq > r.readSeq) {
      r.readSeq = seq;
      this.reads.set(r.id, seq);
    }
    if (confirmed && seq > r.readConfirmed) r.readConfirmed = seq;
  }

  /** A stored (or changed) message: head, peer, and our own messages mark read. */
  async noteMessage(m: StoredMessage): Promise<void> {
    const direct = conversationKind(m.conversationId) !== KIND_GROUP;
    const r = await this.row(m.conversationId, direct && m.senderId !== this.userId ? m.senderId : 0n);
    if (!r) return;
    this.advanceHead(r, headOf(m.messageId, m.conversationSeq, m.senderId, m.createdAtMs, m.messageType, m.body,
      m.state));
    if (m.senderId === this.userId) this.moveRead(r, m.conversationSeq, true);
  }

  /** Recompute every touched row, write it, and fold the changes into `out`. */
  async finish(out: ApplyResult): Promise<ApplyResult> {
    for (const id of this.touched) {
      const r = this.rows.get(id)!;
      await this.recompute(r);
      await this.tx.objectStore("conversations").put(r);
      out.conversations.push(toConversation(r));
    }
    for (const [id, seq] of this.reads) out.reads.push([fromHex(id), seq]);
    out.membership.push(...this.membership);
    return out;
  }

  /** Messages of `conv` with seq in (above, upto] that count as unread. */
  async count(conv: string, above: bigint, upto: bigint | null): Promise<number> {
    if (upto !== null && upto <= above) return 0;
    const hi = upto === null ? [conv, "\uffff"] : [conv, seqKey(upto)];
    const range = IDBKeyRange.bound([conv, seqKey(above + 1n)], hi);
    let n = 0;
    let cur = await this.tx.objectStore("messages").index("byConv").openCursor(range);
    while (cur) {
      const m = cur.value;
      if (m.senderId !== this.userId && m.state === MessageState.NORMAL && m.messageType !== MessageType.CONTROL) n++;
      cur = await cur.continue();
    }
    return n;
  }

  private async recompute(r: ConvRow): Promise<void> {
    const group = r.kind === KIND_GROUP;
    const floor = group ? r.joinedAt : 0n;
    const base = r.readSeq > floor ? r.readSeq : floor;
    // a leaver's interval ends at its LEFT / REMOVED message (docs/design.md §7): nothing above counts
    const hi = group && r.leftAt ? r.leftAt : null;
    const head = hi !== null && r.headSeq > hi ? hi : r.headSeq;
    const snapshot = r.srvReadSeq !== null;
    if (snapshot && !r.complete && r.srvExact) {
      const sBase = r.srvReadSeq! > floor ? r.srvReadSeq! : floor;
      const sHead = hi !== null && r.srvHeadSeq > hi ? hi : r.srvHeadSeq;
      r.complete = (await this.count(r.id, sBase, sHead)) === r.srvUnread;
    }
    let unread: number, exact: boolean;
    if (head <= base) [unread, exact] = [0, true];
    else if (head - base > UNREAD_EXACT_WINDOW) [unread, exact] = [Number(UNREAD_EXACT_WINDOW), false];
    else if (!snapshot || r.complete) [unread, exact] = [await this.count(r.id, base, hi), true];
    else if (r.readSeq === r.srvReadSeq && r.srvExact) {
      const above = r.srvHeadSeq > base ? r.srvHeadSeq : base;
      [unread, exact] = [r.srvUnread + (await this.count(r.id, above, hi)), true];
    } else [unread, exact] = [await this.count(r.id, base, hi), false];
    r.unread = Math.min(unread, Number(UNREAD_EXACT_WINDOW));
    r.unreadExact = exact;
  }
}
