/**
 * A fake gateway for unit tests of the qim-js state machine only (the browser tests
 * use the real stack). It speaks real frames over an in-memory Transport and keeps
 * one user's mailbox: AUTH, PULL_MAILBOX (lane LANE), SEND_MESSAGE (idempotent on cmid:
 * a retry gets the original ack), PULL_SESSION_LIST (empty), MARK_READ, PULL_HISTORY, PING.
 * Hooks let a test hold acks or pulls, drop connections, push (positions, inline
 * entries), kick and expire the cursor.
 */
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { ErrorCode, ErrorSchema } from "../src/gen/qim/v1/common_pb";
import { AuthOkSchema, KickedSchema, PongSchema } from "../src/gen/qim/v1/connection_pb";
import { HistoryBatchSchema, HistoryItemSchema, PullHistorySchema } from "../src/gen/qim/v1/history_pb";
import { MailboxBatchSchema, MailboxEntrySchema, PullMailboxSchema, PushEventsSchema,
  type MailboxEntry } from "../src/gen/qim/v1/mailbox_pb";
import { SendAckSchema, SendMessageSchema, type SendMessage } from "../src/gen/qim/v1/message_pb";
import { MarkReadOkSchema, MarkReadSchema, ReadSyncSchema, SessionListBatchSchema } from "../src/gen/qim/v1/session_pb";
import { toHex } from "../src/sdk/bytes";
import { encodeFrame, FrameDecoder } from "../src/sdk/frame";
import { Op } from "../src/sdk/protocol";
import type { Dialer, Transport } from "../src/sdk/transport";

/** The lane of every MAILBOX_BATCH of the fake (and of its pushes unless told). */
export const LANE = 3;

interface Link {
  send: (op: number, rid: number, body: Uint8Array) => void;
  close: (reason: string) => void;
  open: boolean;
}

export class FakeGateway {
  dials = 0;
  links: Link[] = [];
  mailbox: MailboxEntry[] = [];
  sends: SendMessage[] = [];
  acks = new Map<string, Uint8Array>();
  holdAcks = false;
  dropAfterSend = false;
  /** Moderation of the fake: a replaced body for a send (SEND_ACK replaced, the entry masked), null to keep it. */
  mask: ((body: Uint8Array) => Uint8Array | null) | null = null;
  cursorFloor = 0n;
  /** The mailbox's shard_epoch: a cursor of another one is CURSOR_EXPIRED, as one ahead of the mailbox (0075/0076). */
  shardEpoch = 1n;
  refuseDial = false;
  refuseAuth = false;
  banned: { words: string; untilMs: bigint } | null = null; // AUTH answered ERROR BANNED
  /** A token bucket of one token refilled every `refillMs` for sends (0: no limit). */
  refillMs = 0;
  refused = 0;
  /** PULL_MAILBOX requests answered or held. */
  pulls = 0;
  /** Hold PULL_MAILBOX replies (composed when asked) until releasePulls(). */
  holdPulls = false;
  private heldPulls: (() => void)[] = [];
  private tokenAt = 0;
  private seq = 0n;

  constructor(readonly userId: bigint, readonly deviceId: bigint) {}

  dial: Dialer = async () => {
    this.dials++;
    if (this.refuseDial) throw new Error("refused");
    const dec = new FrameDecoder();
    const client: Transport = { send: () => undefined, close: () => undefined, onMessage: () => undefined,
      onClose: () => undefined };
    const link: Link = {
      open: true,
      send: (op, rid, body) => {
        if (!link.open) return;
        for (const c of encodeFrame(op, rid, body)) queueMicrotask(() => link.open && client.onMessage(c));
      },
      close: (reason) => {
        if (!link.open) return;
        link.open = false;
        queueMicrotask(() => client.onClose(reason));
      },
    };
    client.send = (chunk) => {
      if (!link.open) return;
      for (const f of dec.feedMessage(chunk)) queueMicrotask(() => this.handle(link, f.opcode, f.requestId, f.body));
    };
    client.close = (r) => link.close(r);
    this.links.push(link);
    return client;
  };

  get live(): Link | undefined {
    return this.links.filter((l) => l.open).pop();
  }

  reply<S extends DescMessage>(link: Link, op: number, rid: number, schema: S, init: MessageInitShape<S>): void {
    link.send(op, rid, toBinary(schema, create(schema, init)));
  }

  /** Add an entry to the user's mailbox (mailbox_seq assigned) and return it. */
  deliver(init: MessageInitShape<typeof MailboxEntrySchema>): MailboxEntry {
    const e = create(MailboxEntrySchema, { ...init, mailboxSeq: (this.shardEpoch << 48n) + BigInt(this.mailbox.length + 1) });
    this.mailbox.push(e);
    return e;
  }

  push(entries: MailboxEntry[]): void {
    const l = this.live!;
    this.reply(l, Op.PUSH_EVENTS, 0, PushEventsSchema, { entries });
  }

  /**
   * PUSH_EVENTS of a position (lane, mailboxSeq; 0: a wake-up) and, when `inline` is
   * given, the user's previous position on the lane with the entries at mailboxSeq
   * (decision 0156).
   */
  pushAt(mailboxSeq: bigint, inline: { prev: bigint; entries: MailboxEntry[] } | null = null, lane = LANE): void {
    this.reply(this.live!, Op.PUSH_EVENTS, 0, PushEventsSchema, { lane, mailboxSeq,
      prevMailboxSeq: inline?.prev ?? 0n, inlineEntries: inline?.entries ?? [] });
  }

  /** Send every held pull's reply. */
  releasePulls(): void {
    this.holdPulls = false;
    for (const answer of this.heldPulls.splice(0)) answer();
  }

  kick(reason: number, message = "", untilMs = 0n): void {
    const l = this.live!;
    this.reply(l, Op.KICKED, 0, KickedSchema, { reason, message, untilMs });
    setTimeout(() => l.close("kicked"), 1);
  }

  readSync(conv: Uint8Array, seq: bigint): void {
    this.reply(this.live!, Op.READ_SYNC, 0, ReadSyncSchema, { conversationId: conv, readConversationSeq: seq });
  }

  private error(link: Link, rid: number, op: number, code: ErrorCode, message: string): void {
    this.reply(link, Op.ERROR, rid, ErrorSchema, { code, message, requestOpcode: op });
  }

  private handle(link: Link, op: number, rid: number, body: Uint8Array): void {
    if (op === Op.AUTH && this.banned) { // ERROR BANNED with the end (docs/decisions/0123, Amendment 2)
      this.reply(link, Op.ERROR, rid, ErrorSchema, { code: ErrorCode.BANNED, message: this.banned.words,
        requestOpcode: op, untilMs: this.banned.untilMs });
      setTimeout(() => link.close("banned"), 1);
    } else if (op === Op.AUTH && this.refuseAuth) {
      this.error(link, rid, op, ErrorCode.UNAUTHENTICATED, "token refused");
      setTimeout(() => link.close("auth refused"), 1);
    } else if (op === Op.AUTH) {
      this.reply(link, Op.AUTH_OK, rid, AuthOkSchema, { tenantId: new Uint8Array(16), userId: this.userId,
        deviceId: this.deviceId, heartbeatS: 60, maxBodyBytes: 1 << 20 });
    } else if (op === Op.PING) this.reply(link, Op.PONG, rid, PongSchema, {});
    else if (op === Op.PULL_MAILBOX) {
      this.pulls++;
      const held: Link = { open: true, close: link.close, send: (o, r, b) => this.heldPulls.push(() => link.send(o, r, b)) };
      this.pullMailbox(this.holdPulls ? held : link, rid, body);
    } else if (op === Op.SEND_MESSAGE) this.onSend(link, rid, fromBinary(SendMessageSchema, body));
    else if (op === Op.PULL_SESSION_LIST) this.reply(link, Op.SESSION_LIST_BATCH, rid, SessionListBatchSchema, {});
    else if (op === Op.MARK_READ) {
      const m = fromBinary(MarkReadSchema, body);
      this.reply(link, Op.MARK_READ_OK, rid, MarkReadOkSchema, { conversationId: m.conversationId,
        readConversationSeq: m.readConversationSeq });
    } else if (op === Op.PULL_HISTORY) {
      const req = fromBinary(PullHistorySchema, body);
      const items = this.mailbox.filter((e) => toHex(e.conversationId) === toHex(req.conversationId)
        && e.conversationSeq > req.anchorSeq).map((e) => create(HistoryItemSchema, { messageId: e.messageId,
        conversationSeq: e.conversationSeq, senderId: e.senderId, createdAtMs: e.createdAtMs, messageType: e.messageType,
        body: e.body, bodyIncluded: true, clientMessageId: e.clientMessageId }));
      this.reply(link, Op.HISTORY_BATCH, rid, HistoryBatchSchema, { items, hasMore: false });
    } else this.error(link, rid, op, ErrorCode.INVALID_ARGUMENT, "not in the fake");
  }

  private pullMailbox(link: Link, rid: number, body: Uint8Array): void {
    const op = Op.PULL_MAILBOX;
    const cursor = fromBinary(PullMailboxSchema, body).cursor;
    if (cursor && cursor < this.cursorFloor) return this.error(link, rid, op, ErrorCode.CURSOR_EXPIRED, "trimmed");
    const top = this.mailbox.length ? this.mailbox[this.mailbox.length - 1].mailboxSeq : 0n;
    if (cursor && (cursor >> 48n !== this.shardEpoch || cursor > top)) {
      return this.error(link, rid, op, ErrorCode.CURSOR_EXPIRED, "another shard_epoch or ahead of the mailbox");
    }
    const entries = this.mailbox.filter((e) => e.mailboxSeq > cursor);
    const next = entries.length ? entries[entries.length - 1].mailboxSeq : cursor;
    this.reply(link, Op.MAILBOX_BATCH, rid, MailboxBatchSchema, { entries, nextCursor: next, lane: LANE,
      shardEpoch: Number(this.shardEpoch) });
  }

  private onSend(link: Link, rid: number, m: SendMessage): void {
    if (this.refillMs) {
      const now = Date.now();
      if (now < this.tokenAt) {
        this.refused++;
        this.reply(link, Op.ERROR, rid, ErrorSchema, { code: ErrorCode.RATE_LIMITED, message: "slow down",
          requestOpcode: Op.SEND_MESSAGE, retryAfterMs: this.tokenAt - now });
        return;
      }
      this.tokenAt = now + this.refillMs;
    }
    const key = toHex(m.clientMessageId);
    this.sends.push(m);
    let ack = this.acks.get(key);
    if (!ack) {
      this.seq++;
      const mid = new Uint8Array(16).fill(Number(this.seq % 250n) + 1);
      const masked = this.mask?.(m.body) ?? null; // moderation's replaced body (decision 0126)
      ack = toBinary(SendAckSchema, create(SendAckSchema, { clientMessageId: m.clientMessageId, messageId: mid,
        conversationId: m.conversationId, conversationSeq: this.seq, createdAtMs: 1000n + this.seq,
        ...(masked ? { replaced: true, body: masked } : {}) }));
      this.acks.set(key, ack);
      this.deliver({ eventType: 1, messageId: mid, conversationId: m.conversationId, conversationSeq: this.seq,
        senderId: this.userId, createdAtMs: 1000n + this.seq, messageType: m.messageType, body: masked ?? m.body,
        clientMessageId: m.clientMessageId });
    }
    if (this.dropAfterSend) {
      this.dropAfterSend = false;
      link.close("dropped after send");
      return;
    }
    if (!this.holdAcks) link.send(Op.SEND_ACK, rid, ack);
  }
}
