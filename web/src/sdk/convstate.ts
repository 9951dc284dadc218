/**
 * Pin, mute, hide and read receipts in qim-js (the counterpart of qim.sdk.convstate;
 * docs/sdk.md "Pin, mute, hide", "Read receipts"; docs/decisions/0122). Held in memory,
 * exact after every connect: each session list page and SESSION_DELTA carries the
 * absolute state of its entries, CONVERSATION_STATE_SYNC another device's change,
 * READ_RECEIPT the peer's read position in a direct chat (forward only between pulls).
 * Told as "conversationState" and "peerRead". The list the app shows (`shape`): pinned
 * first, newest activity first in each part; hidden ones left out until a message newer
 * than the one they were hidden at arrives; muted ones keep their unread count. The
 * choices carry the server's version (docs/decisions/0157): an older one arriving late
 * (a SESSION_DELTA summarized before the change) is not applied.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ConversationStateSchema, PullReadersSchema, ReadReceiptSchema, ReadersBatchSchema, ReceiptsOkSchema,
  SetConversationStateSchema, SetReceiptsSchema, type ConversationState as WireState } from "../gen/qim/v1/convstate_pb";
import type { SessionEntry } from "../gen/qim/v1/session_pb";
import { toHex } from "./bytes";
import type { RuntimeCore } from "./core";
import type { ApplyResult, Conversation, ConversationState } from "./model";
import { MessageType, Op } from "./protocol";
import { Backoff, withRetry } from "./retry";

export type { ConversationState } from "./model";

/** muted_until meaning "for ever" (2^64 − 1; docs/protocol.md). */
export const MUTE_FOREVER = (1n << 64n) - 1n;
/** PULL_READERS answers for groups of at most this many members (qim.services.session.convstate). */
export const READERS_GROUP_MAX = 100;

/** Who read the message at `conversationSeq` (never the asker), of `counted` members. */
export interface Readers {
  conversationId: Uint8Array;
  conversationSeq: bigint;
  readerUserIds: bigint[];
  counted: number;
}

/** Whether `s` is muted at `nowMs` (default now). */
export function isMuted(s: ConversationState, nowMs: bigint = BigInt(Date.now())): boolean {
  return s.mutedUntil > nowMs;
}

function blank(conv: Uint8Array): ConversationState {
  return { conversationId: conv, pinned: false, mutedUntil: 0n, hidden: false, hiddenUpto: 0n, mentioned: false,
    peerReadSeq: 0n, version: 0n };
}

function same(a: ConversationState, b: ConversationState): boolean {
  return a.pinned === b.pinned && a.mutedUntil === b.mutedUntil && a.hidden === b.hidden
    && a.hiddenUpto === b.hiddenUpto && a.mentioned === b.mentioned && a.peerReadSeq === b.peerReadSeq;
}

/** The in-memory states of one runtime and the calls that change them. */
export class ConvStates {
  private states = new Map<string, ConversationState>();
  /** conversation (hex) -> the highest READ_RECEIPT told as "peerRead". */
  private ticked = new Map<string, bigint>();

  constructor(private readonly rt: RuntimeCore) {
    rt.frameHandlers.set(Op.CONVERSATION_STATE_SYNC, (body) => {
      void this.applyWire(fromBinary(ConversationStateSchema, body), "sync").catch(() => undefined);
    });
    rt.frameHandlers.set(Op.READ_RECEIPT, (body) => this.onReceipt(body));
    const told = rt.tell.bind(rt);
    rt.tell = (r, source) => { told(r, source); this.noteMentions(r); };
  }

  /**
   * A stored message that mentions this user (or all) above the read position sets
   * `mentioned` at once, as the server's next entry will (its unread set): without it a
   * live mention showed no "@" until the next list pull. A read clears it through the
   * server's SESSION_DELTA. The same rule as qim.sdk (qim/sdk/convstate.py).
   */
  private noteMentions(r: ApplyResult): void {
    const me = this.rt.store.meta.userId;
    const reads = new Map(r.conversations.map((c) => [toHex(c.conversationId), c.readConversationSeq]));
    for (const m of r.inserted) {
      if (m.senderId === me || m.messageType === MessageType.CONTROL || m.state !== 0) continue;
      if (!(m.mentionAll || m.mentions?.includes(me))) continue;
      if (m.conversationSeq <= (reads.get(toHex(m.conversationId)) ?? 0n)) continue;
      const old = this.get(m.conversationId);
      if (!old.mentioned) this.put({ ...old, mentioned: true }, "local");
    }
  }

  /** The state held for a conversation (defaults when none is known). */
  get(conv: Uint8Array): ConversationState {
    return this.states.get(toHex(conv)) ?? blank(conv);
  }

  private put(s: ConversationState, source: "local" | "sync" | "server"): void {
    const old = this.get(s.conversationId);
    if (same(old, s) && old.version === s.version) return;
    this.states.set(toHex(s.conversationId), s);
    if (!same(old, s)) this.rt.emit({ type: "conversationState", state: s, source }); // a new version alone is not news
  }

  /** Absolute states from a list page or SESSION_DELTA (Sessions.note); the choices of
   * an entry older than the held version are late and kept as held (decision 0157). */
  noteEntries(entries: SessionEntry[]): void {
    for (const e of entries) {
      const old = this.get(e.conversationId);
      if (e.stateVersion < old.version) {
        this.put({ ...old, mentioned: e.mentioned, peerReadSeq: e.peerReadSeq }, "server");
        continue;
      }
      const seq = e.lastMessage?.conversationSeq ?? 0n;
      this.put({ conversationId: e.conversationId, pinned: e.pinned, mutedUntil: e.mutedUntil, hidden: e.hidden,
        hiddenUpto: e.hidden ? seq : 0n, mentioned: e.mentioned, peerReadSeq: e.peerReadSeq,
        version: e.stateVersion }, "server");
    }
  }

  private async applyWire(w: WireState, source: "local" | "sync"): Promise<ConversationState> {
    const entry = await this.rt.store.conversation(w.conversationId);
    const last = entry?.lastMessage?.conversationSeq ?? 0n;
    const old = this.get(w.conversationId);
    if (w.version < old.version) return old; // late: a newer state is held (decision 0157)
    const upto = w.hidden ? (old.hiddenUpto > last ? old.hiddenUpto : last) : 0n;
    const s = { ...old, pinned: w.pinned, mutedUntil: w.mutedUntil, hidden: w.hidden, hiddenUpto: upto,
      version: w.version };
    this.put(s, source);
    return s;
  }

  private onReceipt(body: Uint8Array): void {
    const r = fromBinary(ReadReceiptSchema, body);
    const old = this.get(r.conversationId);
    const key = toHex(r.conversationId);
    // watermarks only move forward
    if (r.readConversationSeq > old.peerReadSeq) this.states.set(key, { ...old, peerReadSeq: r.readConversationSeq });
    // told once per newer receipt, by its own watermark: the user's SESSION_DELTA carries the
    // same position and may arrive first (raising peerReadSeq silently); the receipt still tells it
    if (r.readConversationSeq <= (this.ticked.get(key) ?? 0n)) return;
    this.ticked.set(key, r.readConversationSeq);
    this.rt.emit({ type: "peerRead", conversationId: r.conversationId, readerUserId: r.readerUserId,
      seq: r.readConversationSeq });
  }

  /** Whether `c` is hidden now. */
  hidden(c: Conversation): boolean {
    const s = this.states.get(toHex(c.conversationId));
    return !!s && s.hidden && (c.lastMessage?.conversationSeq ?? 0n) <= s.hiddenUpto;
  }

  /** The list the app shows: pinned first, hidden left out. */
  shape(list: Conversation[]): Conversation[] {
    const shown = list.filter((c) => !this.hidden(c));
    return [...shown.filter((c) => this.get(c.conversationId).pinned),
      ...shown.filter((c) => !this.get(c.conversationId).pinned)];
  }

  private async call(opcode: number, body: Uint8Array): Promise<Uint8Array> {
    const reply = await withRetry(() => this.rt.request(opcode, body), new Backoff(50, 2000, this.rt.retryBudgetMs));
    return reply.body;
  }

  private async change(conv: Uint8Array, fields: { pinned?: boolean; mutedUntil?: bigint; hidden?: boolean }) {
    const entry = await this.rt.store.conversation(conv);
    const req = create(SetConversationStateSchema, { conversationId: conv, peerUserId: entry?.peerUserId ?? 0n,
      ...fields });
    const body = await this.call(Op.SET_CONVERSATION_STATE, toBinary(SetConversationStateSchema, req));
    return this.applyWire(fromBinary(ConversationStateSchema, body), "local");
  }

  /** Pin (or unpin) for every device of the user. ServerError (FORBIDDEN, NOT_FOUND). */
  pin(conv: Uint8Array, pinned = true): Promise<ConversationState> {
    return this.change(conv, { pinned });
  }

  /** Mute until `untilMs` (ms since the epoch; default for ever). */
  mute(conv: Uint8Array, untilMs: bigint = MUTE_FOREVER): Promise<ConversationState> {
    if (untilMs <= 0n) throw new RangeError("untilMs must be a time in ms since the epoch (unmute to unmute)");
    return this.change(conv, { mutedUntil: untilMs });
  }

  /** End a mute. */
  unmute(conv: Uint8Array): Promise<ConversationState> {
    return this.change(conv, { mutedUntil: 0n });
  }

  /** Hide (archive) until a newer message arrives; `hidden = false` shows it again. */
  hide(conv: Uint8Array, hidden = true): Promise<ConversationState> {
    return this.change(conv, { hidden });
  }

  /** SET_RECEIPTS (undefined: only ask); the setting held. Off clears the peers' positions held here. */
  async receipts(enabled?: boolean): Promise<boolean> {
    const req = create(SetReceiptsSchema, enabled === undefined ? {} : { enabled });
    const on = fromBinary(ReceiptsOkSchema, await this.call(Op.SET_RECEIPTS, toBinary(SetReceiptsSchema, req))).enabled;
    if (!on) for (const s of [...this.states.values()]) if (s.peerReadSeq) this.put({ ...s, peerReadSeq: 0n }, "local");
    return on;
  }

  /** PULL_READERS. ServerError FORBIDDEN (receipts off, not a member, a group above READERS_GROUP_MAX). */
  async readers(conv: Uint8Array, seq: bigint): Promise<Readers> {
    const entry = await this.rt.store.conversation(conv);
    const req = create(PullReadersSchema, { conversationId: conv, conversationSeq: seq,
      peerUserId: entry?.peerUserId ?? 0n });
    const got = fromBinary(ReadersBatchSchema, await this.call(Op.PULL_READERS, toBinary(PullReadersSchema, req)));
    return { conversationId: got.conversationId, conversationSeq: got.conversationSeq,
      readerUserIds: [...got.readerUserIds], counted: got.counted };
  }
}
