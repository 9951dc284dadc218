/**
 * Reactions and typing in qim-js (the counterpart of qim.sdk.reactions; docs/sdk.md
 * "Reactions and typing"; docs/decisions/0121). Ephemeral: nothing is stored, no unread,
 * no list move. `add`/`remove` answer the message's summary after the change
 * (idempotent per user, message and emoji); `summaries` reads one history page's;
 * mailbox pulls carry them too (MailboxEntry.reactions): `known(id)` is the newest one learnt;
 * REACTION_EVENTS are told as "reactions" (absolute counts, `mine` as far as this client
 * knows), TYPING_EVENTS as "typing", and an indication not renewed within its
 * expires_in_ms is told stopped by itself; a message from the typist in that
 * conversation (a pulled MESSAGE entry) ends it at once, told stopped (no "typing…"
 * lingers behind what was typed). Every summary carries the message's `version`
 * (the server's order of its changes; decision 0121, amended): events arrive out of order
 * (through different gateways), so per message only a higher version than the one held
 * replaces it, whatever brought it, and an event that is not newer is not told at all.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ErrorCode } from "../gen/qim/v1/common_pb";
import type { MailboxEntry } from "../gen/qim/v1/mailbox_pb";
import { HistoryBatchSchema, HistoryDirection, PullHistorySchema } from "../gen/qim/v1/history_pb";
import {
  ReactionEventsSchema, ReactOkSchema, ReactSchema, TypingEventsSchema, TypingOkSchema, TypingSchema,
  type MessageReactionSummary,
} from "../gen/qim/v1/reaction_pb";
import { toHex } from "./bytes";
import { ServerError } from "./errors";
import type { QimEvent, ReactionCount } from "./events";
import { EventType, Op } from "./protocol";

/** The emoji limit of qim.wire.reaction (1..32 bytes of UTF-8, no whitespace or controls). */
export const REACTION_EMOJI_MAX_BYTES = 32;
/** One TYPING per conversation at most this often (the gateway's limit). */
export const TYPING_MIN_INTERVAL_MS = 2000;
/** Summaries kept by `known` (a bound on memory, as qim.sdk's KNOWN_MAX). */
export const KNOWN_MAX = 10_000;

/** What reactions.ts needs of the runtime (the Runtime has all of it). */
export interface ReactionHost {
  request(opcode: number, body: Uint8Array): Promise<{ opcode: number; body: Uint8Array }>;
  emit(e: QimEvent): void;
  readonly frameHandlers: Map<number, (body: Uint8Array) => void>;
  readonly pulledHandlers: ((entries: MailboxEntry[]) => void)[];
}

/** Throws ServerError(INVALID_ARGUMENT) for an emoji the server refuses (nothing is sent). */
export function checkEmoji(emoji: string): void {
  const size = new TextEncoder().encode(emoji).length;
  if (size < 1 || size > REACTION_EMOJI_MAX_BYTES || /[\s\p{Cc}\p{Co}\p{Cn}]/u.test(emoji)) {
    throw new ServerError(ErrorCode.INVALID_ARGUMENT, `not an emoji of 1 to ${REACTION_EMOJI_MAX_BYTES} bytes without spaces`);
  }
}

function counts(s: MessageReactionSummary | undefined, mine?: Set<string>): ReactionCount[] {
  return (s?.counts ?? []).map((c) => ({ emoji: c.emoji, count: c.count, mine: mine ? mine.has(c.emoji) : c.mine }));
}

/** A learnt summary and its version (0n: none assigned, from a server before versions). */
interface Learnt { counts: ReactionCount[]; version: bigint }

/** Whether a summary of `version` replaces `held` (qim.sdk.reactions.newer): a higher
 * version does, a lower or equal one is nothing new; unversioned ones replace only
 * unversioned ones (the last learnt winning). */
export function isNewer(version: bigint, held: { version: bigint } | undefined): boolean {
  return !held || version > held.version || (version === 0n && held.version === 0n);
}

/** Reactions and typing of one runtime; `peerOf(conv)` names a direct chat's peer (0n: a group). */
export class Reactions {
  private mine = new Map<string, Set<string>>(); // message id hex -> own emoji
  private learnt = new Map<string, Learnt>(); // message id hex -> newest summary, insertion order
  private typingUntil = new Map<string, number>(); // conv hex + ":" + user -> Date.now() expiry
  private sentTyping = new Map<string, number>(); // conv hex -> Date.now() of our last TYPING

  constructor(private readonly host: ReactionHost, private readonly userId: bigint,
              private readonly peerOf: (conv: Uint8Array) => Promise<bigint>) {
    host.frameHandlers.set(Op.REACTION_EVENTS, (body) => this.onReaction(body));
    host.frameHandlers.set(Op.TYPING_EVENTS, (body) => this.onTyping(body));
    host.pulledHandlers.push((entries) => this.onPulled(entries));
  }

  /** The newest summary learnt of a message (the highest version of a pull, history page,
   * REACT reply or event, whatever order they came in); undefined: none. */
  known(messageId: Uint8Array): ReactionCount[] | undefined {
    return this.learnt.get(toHex(messageId))?.counts;
  }

  /** The version of `known(messageId)` (0n: none learnt, or unversioned). */
  knownVersion(messageId: Uint8Array): bigint {
    return this.learnt.get(toHex(messageId))?.version ?? 0n;
  }

  /** Keep the summary if newer than the one held (`isNewer`); false: ignored. */
  private learn(key: string, summary: ReactionCount[], version: bigint): boolean {
    if (!isNewer(version, this.learnt.get(key))) return false;
    this.learnt.delete(key); // the latest learnt last, the oldest dropped past KNOWN_MAX
    this.learnt.set(key, { counts: summary, version });
    this.mine.set(key, new Set(summary.filter((c) => c.mine).map((c) => c.emoji)));
    if (this.learnt.size > KNOWN_MAX) {
      const oldest = this.learnt.keys().next().value as string;
      this.learnt.delete(oldest);
      this.mine.delete(oldest);
    }
    return true;
  }

  /** The entries of an applied MAILBOX_BATCH: their summaries (absent: never any; decision 0121 §4);
   * a new message ends its sender's typing in its conversation (module doc). */
  private onPulled(entries: MailboxEntry[]): void {
    for (const e of entries) {
      if (e.reactions) this.learn(toHex(e.messageId), counts(e.reactions), e.reactions.version);
      if (e.eventType === EventType.MESSAGE) this.endTyping(e.conversationId, e.senderId);
    }
  }

  /** `user` stopped typing in `conv`: forgotten, and told when it was typing (a pending expiry then finds nothing). */
  private endTyping(conv: Uint8Array, user: bigint): void {
    const key = `${toHex(conv)}:${user}`;
    const was = (this.typingUntil.get(key) ?? 0) > Date.now();
    this.typingUntil.delete(key);
    if (was) this.host.emit({ type: "typing", conversationId: conv, userId: user, typing: false });
  }

  /** Add this user's `emoji` to a message: the summary after it (`known` may hold a newer one). */
  add(conv: Uint8Array, messageId: Uint8Array, emoji: string): Promise<ReactionCount[]> {
    return this.react(conv, messageId, emoji, false);
  }

  /** Remove this user's `emoji` from a message: the summary after it. */
  remove(conv: Uint8Array, messageId: Uint8Array, emoji: string): Promise<ReactionCount[]> {
    return this.react(conv, messageId, emoji, true);
  }

  private async react(conv: Uint8Array, messageId: Uint8Array, emoji: string, remove: boolean) {
    checkEmoji(emoji);
    const req = create(ReactSchema, { conversationId: conv, peerUserId: await this.peerOf(conv), messageId, emoji, remove });
    const reply = await this.host.request(Op.REACT, toBinary(ReactSchema, req));
    const summary = fromBinary(ReactOkSchema, reply.body).summary;
    const out = counts(summary);
    this.learn(toHex(messageId), out, summary?.version ?? 0n);
    return out;
  }

  /** The reactions of one history page (the newest by default): message id hex -> summary. */
  async summaries(conv: Uint8Array, anchorSeq = 0n, limit = 50): Promise<Map<string, ReactionCount[]>> {
    const req = create(PullHistorySchema, { conversationId: conv, peerUserId: await this.peerOf(conv), anchorSeq,
      direction: HistoryDirection.OLDER, limit });
    const batch = fromBinary(HistoryBatchSchema, (await this.host.request(Op.PULL_HISTORY, toBinary(PullHistorySchema, req))).body);
    const out = new Map<string, ReactionCount[]>();
    for (const item of batch.items) {
      if (!item.reactions) continue;
      const c = counts(item.reactions);
      this.learn(toHex(item.messageId), c, item.reactions.version); // an emptied one too
      if (c.length) out.set(toHex(item.messageId), c);
    }
    return out;
  }

  /** Tell the other members this user is typing (or `stopped`); false when sooner than 2 s after the last. */
  async typing(conv: Uint8Array, stopped = false): Promise<boolean> {
    const key = toHex(conv);
    if (!stopped && Date.now() - (this.sentTyping.get(key) ?? -Infinity) < TYPING_MIN_INTERVAL_MS) return false;
    this.sentTyping.set(key, Date.now());
    const req = create(TypingSchema, { conversationId: conv, peerUserId: await this.peerOf(conv), stopped });
    return fromBinary(TypingOkSchema, (await this.host.request(Op.TYPING, toBinary(TypingSchema, req))).body).delivered;
  }

  /** The users typing in `conv` now. */
  typingIn(conv: Uint8Array): bigint[] {
    const prefix = toHex(conv) + ":";
    const now = Date.now();
    return [...this.typingUntil].filter(([k, until]) => k.startsWith(prefix) && until > now)
      .map(([k]) => BigInt(k.slice(prefix.length)));
  }

  private onReaction(body: Uint8Array): void {
    const f = fromBinary(ReactionEventsSchema, body);
    const key = toHex(f.messageId);
    const mine = new Set(this.mine.get(key) ?? []);
    if (f.userId === this.userId) { if (f.removed) mine.delete(f.emoji); else mine.add(f.emoji); }
    const summary = f.counts.map((c) => ({ emoji: c.emoji, count: c.count, mine: mine.has(c.emoji) }));
    if (!this.learn(key, summary, f.version)) return; // not newer: nothing to tell
    this.host.emit({ type: "reactions", conversationId: f.conversationId, messageId: f.messageId, userId: f.userId,
      emoji: f.emoji, removed: f.removed, summary, version: f.version });
  }

  private onTyping(body: Uint8Array): void {
    const f = fromBinary(TypingEventsSchema, body);
    const key = `${toHex(f.conversationId)}:${f.userId}`;
    const was = (this.typingUntil.get(key) ?? 0) > Date.now();
    if (f.stopped || !f.expiresInMs) return this.endTyping(f.conversationId, f.userId);
    const until = Date.now() + f.expiresInMs;
    this.typingUntil.set(key, until);
    if (!was) this.host.emit({ type: "typing", conversationId: f.conversationId, userId: f.userId, typing: true });
    setTimeout(() => {
      if (this.typingUntil.get(key) !== until) return; // renewed or stopped since
      this.typingUntil.delete(key);
      this.host.emit({ type: "typing", conversationId: f.conversationId, userId: f.userId, typing: false });
    }, f.expiresInMs + 50);
  }
}
