/**
 * Transmission of pending sends (qim.sdk.sender). One device's sends to one
 * conversation get conversation_seq in submission order, also across retries and
 * reconnects: every transmission names, as previous_client_message_id, the nearest
 * earlier (by ordinal) send to the same conversation that is still unresolved, and the
 * first transmission of a send is written synchronously when it is started (frames
 * leave in submission order; after a reconnect every unresolved send is started again
 * in ordinal order). Outcomes: SEND_ACK → acked; UNAVAILABLE / MAILBOX_DIRTY → back
 * off and retransmit with the same cmid; RATE_LIMITED → the gate holds it for the
 * hint; a permanent ERROR → failed (body kept) and sendFailed; ConnectionLost → the
 * reconnect's reconciliation resends or resolves it. A send never stays pending for
 * ever on a live connection.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ErrorCode } from "../gen/qim/v1/common_pb";
import { SendAckSchema, SendMessageSchema } from "../gen/qim/v1/message_pb";
import { toHex } from "./bytes";
import type { Connection } from "./connection";
import { ConnectionLost, RETRYABLE, ServerError } from "./errors";
import type { SendAck } from "./events";
import type { PendingSend } from "./model";
import { Op } from "./protocol";
import { Backoff } from "./retry";
import type { RuntimeCore } from "./core";

const ALREADY_RESOLVED = new Error("resolved while waiting at the rate gate");

/** The unresolved sends of one runtime and their transmission. */
export class Sender {
  private rows = new Map<string, PendingSend>();
  private inflight = new Set<string>();
  private tickets = new Map<string, number>(); // RateGate place in line, taken when first started

  constructor(private readonly rt: RuntimeCore) {}

  /** Remember an unresolved send (idempotent). */
  track(row: PendingSend): void {
    const id = toHex(row.clientMessageId);
    if (!this.rows.has(id)) this.rows.set(id, row);
  }

  /** The send is acked, committed or failed: later sends stop naming it. */
  resolved(cmid: Uint8Array): void {
    this.rows.delete(toHex(cmid));
    this.tickets.delete(toHex(cmid));
  }

  /** True while the send is unresolved here. */
  has(cmid: Uint8Array): boolean {
    return this.rows.has(toHex(cmid));
  }

  /** cmid of the nearest earlier unresolved send to the same conversation, or empty. */
  previous(row: PendingSend): Uint8Array {
    const conv = toHex(row.conversationId);
    let best: PendingSend | null = null;
    for (const r of this.rows.values()) {
      if (toHex(r.conversationId) === conv && r.ordinal < row.ordinal && (!best || r.ordinal > best.ordinal)) best = r;
    }
    return best ? best.clientMessageId : new Uint8Array(0);
  }

  /** SEND_MESSAGE bytes of one transmission (previous id as of now). */
  frame(row: PendingSend): Uint8Array {
    return toBinary(SendMessageSchema, create(SendMessageSchema, { clientMessageId: row.clientMessageId,
      conversationId: row.conversationId, recipientUserId: row.recipientUserId, messageType: row.messageType,
      customType: row.customType, body: row.body, previousClientMessageId: this.previous(row),
      replyToMessageId: row.extras?.replyTo ?? new Uint8Array(0), mentionUserIds: row.extras?.mentions ?? [],
      mentionAll: row.extras?.mentionAll ?? false }));
  }

  /** Transmissions of an earlier connection are gone with it. */
  newConnection(): void {
    this.inflight.clear();
  }

  /** Every tracked unresolved send in ordinal order. */
  unresolved(): PendingSend[] {
    return [...this.rows.values()].sort((a, b) => (a.ordinal < b.ordinal ? -1 : a.ordinal > b.ordinal ? 1 : 0));
  }

  /** Start transmitting `row` on `conn` (no-op when already in flight). */
  start(conn: Connection, row: PendingSend): void {
    const id = toHex(row.clientMessageId);
    if (this.inflight.has(id) || !this.rows.has(id)) return;
    this.inflight.add(id);
    if (!this.tickets.has(id)) this.tickets.set(id, this.rt.gate.ticket());
    void this.outcome(conn, row).finally(() => {
      if (conn === this.rt.conn) this.inflight.delete(id);
    });
  }

  private async outcome(conn: Connection, row: PendingSend): Promise<void> {
    const rt = this.rt;
    const backoff = new Backoff(20, 2000, null); // retried until answered
    for (;;) {
      if (!this.has(row.clientMessageId)) return; // resolved meanwhile (our own mailbox entry)
      let reply;
      const ticket = this.tickets.get(toHex(row.clientMessageId)) ?? rt.gate.ticket();
      try {
        // RATE_LIMITED waits in line inside the gate; the frame (previous id) is built per transmission
        reply = await rt.gate.through(ticket, () => {
          if (!conn.open) throw new ConnectionLost("connection closed while waiting at the rate gate");
          if (!this.has(row.clientMessageId)) throw ALREADY_RESOLVED;
          return conn.request(Op.SEND_MESSAGE, this.frame(row), rt.sendTimeoutMs);
        });
      } catch (e) {
        if (e === ALREADY_RESOLVED) return; // our own mailbox entry resolved it while it waited
        if (e instanceof ConnectionLost) {
          if (conn.open) conn.abort(e.message); // no reply on a live link: reconnect and reconcile
          return;
        }
        if (e instanceof ServerError && RETRYABLE.has(e.code)) {
          await backoff.wait(e); // UNAVAILABLE ("previous send not yet sequenced"), MAILBOX_DIRTY
          continue;
        }
        await this.fail(row, e as Error);
        return;
      }
      if (reply.opcode !== Op.SEND_ACK) {
        conn.abort(`unexpected reply 0x${reply.opcode.toString(16)} to SEND_MESSAGE`);
        return;
      }
      const a = fromBinary(SendAckSchema, reply.body);
      this.resolved(row.clientMessageId);
      const ack: SendAck = { clientMessageId: row.clientMessageId, messageId: a.messageId,
        conversationId: a.conversationId, conversationSeq: a.conversationSeq, createdAtMs: a.createdAtMs,
        reconciled: false, ...(a.replaced ? { replaced: true, body: a.body } : {}) };
      // null: storage trouble (told as "storage"); the send is committed all the same
      const changed = await rt.store.markAcked(ack).catch(() => null);
      rt.settle(row.clientMessageId, ack);
      if (!changed || changed.conversations.length || changed.reads.length) {
        if (changed) rt.tell(changed);
        rt.emit({ type: "pendingResolved", acks: [ack] });
      }
      return;
    }
  }

  /** A permanent outcome: row failed (body kept), the waiter gets `e`, the app sendFailed. */
  async fail(row: PendingSend, e: Error): Promise<void> {
    this.resolved(row.clientMessageId);
    const code = e instanceof ServerError ? e.code : ErrorCode.INTERNAL;
    const changed = await this.rt.store.markFailed(row.clientMessageId, e.message);
    this.rt.settle(row.clientMessageId, null, e);
    if (changed) this.rt.emit({ type: "sendFailed", clientMessageId: row.clientMessageId, code, message: e.message });
  }
}
