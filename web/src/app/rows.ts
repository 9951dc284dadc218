/**
 * The rows of the open conversation, keyed so a send is ONE row from pending to sent
 * (or failed), whichever arrives first: the SEND_ACK, our own mailbox entry (the
 * commit event can come before the send call returns) or a history page. Own messages
 * carry their client_message_id and are keyed by it; others' by message_id. Pure: no
 * DOM (unit-tested in test/rows.test.ts).
 */

import { toHex, fromUtf8 } from "../sdk/bytes";
import type { SendAck } from "../sdk/events";
import type { PendingSend, StoredMessage } from "../sdk/model";
import { MessageState, MessageType } from "../sdk/protocol";
import { mediaWords } from "./notices";

export type RowState = "pending" | "sent" | "failed" | "recalled" | "deleted";

export interface Row {
  key: string;
  messageId: string | null;
  seq: bigint | null;
  ordinal: bigint | null;
  senderId: bigint;
  text: string;
  state: RowState;
  createdAtMs: number;
  failure: string;
  /** The quoted message of a reply (decision 0120); whether the body is an edited version. */
  reply?: { messageId: string; senderId: bigint; state: number; preview: string } | null;
  edited?: boolean;
  /** A MEDIA message's body (its signed MediaRef: the thumbnail and what opens it; mediaview.ts). */
  media?: Uint8Array;
}

const stateOf = (s: number): RowState => s === MessageState.RECALLED ? "recalled"
  : s === MessageState.DELETED ? "deleted" : "sent";

/** Rows of one conversation. */
export class Rows {
  private byKey = new Map<string, Row>();
  private keyOfMid = new Map<string, string>();

  constructor(readonly conversation: string, readonly me: bigint) {}

  /** A stored message (mailbox, history or store): merged into its row. */
  message(m: StoredMessage): void {
    if (toHex(m.conversationId) !== this.conversation) return;
    const mid = toHex(m.messageId);
    const key = this.keyOfMid.get(mid) ?? (m.clientMessageId ? toHex(m.clientMessageId) : mid);
    const old = this.byKey.get(key);
    this.byKey.set(key, { key, messageId: mid, seq: m.conversationSeq, ordinal: old?.ordinal ?? null,
      senderId: m.senderId, text: m.messageType === MessageType.MEDIA ? mediaWords(m.body) : fromUtf8(m.body), state: stateOf(m.state), createdAtMs: Number(m.createdAtMs),
      failure: "", media: m.messageType === MessageType.MEDIA ? m.body : undefined, reply: m.reply ? { messageId: toHex(m.reply.messageId), senderId: m.reply.senderId,
        state: m.reply.state, preview: m.reply.preview } : null, edited: (m.version ?? 0) > 0 && m.state === 0 });
    this.keyOfMid.set(mid, key);
  }

  /** A send stored as pending (or read back after a reload in any unsent state). */
  pending(p: PendingSend): void {
    if (toHex(p.conversationId) !== this.conversation) return;
    const key = toHex(p.clientMessageId);
    const old = this.byKey.get(key);
    if (old && old.state !== "pending" && old.state !== "failed") return; // already committed: never back
    const media = p.messageType === MessageType.MEDIA; // words and a thumbnail, never the reference's bytes
    const state: RowState = p.state === "failed" ? "failed" : p.state === "pending" ? "pending" : "sent";
    this.byKey.set(key, { key, messageId: p.messageId ? toHex(p.messageId) : null,
      seq: p.state === "pending" || p.state === "failed" ? null : p.conversationSeq, ordinal: p.ordinal,
      senderId: this.me, text: media ? mediaWords(p.body) : fromUtf8(p.body), state, createdAtMs: p.createdLocalMs,
      failure: p.failure, media: media ? p.body : undefined });
    if (p.messageId) this.keyOfMid.set(toHex(p.messageId), key);
  }

  /** A send's SEND_ACK or reconciliation: its row becomes sent with its seq. */
  acked(a: SendAck): void {
    if (toHex(a.conversationId) !== this.conversation) return;
    const key = toHex(a.clientMessageId);
    const row = this.byKey.get(key);
    if (!row) return; // not on this page: the store's copy arrives as a message
    const mid = toHex(a.messageId);
    this.keyOfMid.set(mid, key);
    if (row.state === "pending" || row.state === "failed") {
      Object.assign(row, { state: "sent", messageId: mid, seq: a.conversationSeq, failure: "" });
    }
  }

  /** A permanent refusal of a send. */
  failed(cmid: Uint8Array, message: string): void {
    const row = this.byKey.get(toHex(cmid));
    if (row && row.state === "pending") Object.assign(row, { state: "failed", failure: message });
  }

  /** Messages no longer visible (REBUILD). */
  removed(mids: Uint8Array[]): void {
    for (const m of mids) {
      const key = this.keyOfMid.get(toHex(m));
      if (key) this.byKey.delete(key);
    }
  }

  /** Rows in display order: committed by seq, then unsent ones by ordinal. */
  list(): Row[] {
    const rows = [...this.byKey.values()];
    const rank = (r: Row) => (r.seq !== null ? 0 : 1);
    return rows.sort((a, b) => rank(a) - rank(b) || cmp(a.seq ?? a.ordinal ?? 0n, b.seq ?? b.ordinal ?? 0n));
  }

  /** The lowest committed seq shown (the anchor for paging back), or 0. */
  oldestSeq(): bigint {
    let low = 0n;
    for (const r of this.byKey.values()) if (r.seq !== null && (low === 0n || r.seq < low)) low = r.seq;
    return low;
  }
}

function cmp(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
