/**
 * The conversation list kept current from the server (qim.sdk.sessions): after
 * every (re)connect's mailbox sync the whole list is pulled (each page's absolute
 * entries become the store's server snapshot), then read positions this device moved
 * but the server never confirmed are sent again. SESSION_DELTA (absolute) is applied
 * like a page; READ_SYNC (another device or tab of the user read) moves the position
 * here, forward only, told as readPosition with source "sync". markRead moves the
 * position locally at once, then MARK_READ; offline it is sent after the next pull.
 * The user's badge (UserBadgeState, docs/decisions/0129) rides on pages and deltas as an
 * absolute value with a version: only a higher version replaces it (a late frame never
 * shows an older badge), told as the "badge" event.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ErrorCode } from "../gen/qim/v1/common_pb";
import { MarkReadOkSchema, MarkReadSchema, PullSessionListSchema, SessionListBatchSchema, type ReadSync,
  type SessionDelta, type SessionEntry } from "../gen/qim/v1/session_pb";
import type { Connection } from "./connection";
import { ConnectionLost, NotConnected, ServerError } from "./errors";
import type { ApplyResult } from "./model";
import { Op, SESSION_PAGE_MAX_LIMIT } from "./protocol";
import { Backoff, withRetry } from "./retry";
import type { RuntimeCore } from "./core";

/** Session list, SESSION_DELTA, READ_SYNC and MARK_READ of one runtime. */
export class Sessions {
  pulls = 0;
  /** The user's total unread as the server holds it, and its version (0n: not known yet). */
  badge = { badge: 0n, version: 0n };
  /** Every entry of a page or SESSION_DELTA, after it was applied (ConvStates.noteEntries). */
  note: (entries: SessionEntry[]) => void = () => undefined;

  constructor(private readonly rt: RuntimeCore) {
    rt.afterSync.push((c) => this.pullList(c));
    rt.onSessionDelta = (d) => this.guard(this.onDelta(d));
    rt.onReadSync = (r) => this.guard(this.onReadSync(r));
  }

  private apply(source: "local" | "sync" | "server", r: ApplyResult): ApplyResult {
    this.rt.tell(r, source);
    return r;
  }

  /** Every page of PULL_SESSION_LIST on `conn`, then unconfirmed read positions again. */
  async pullList(conn: Connection | null = this.rt.conn): Promise<void> {
    const rt = this.rt;
    if (!conn || !conn.open) throw new NotConnected("no connection");
    let cursor: Uint8Array = new Uint8Array(0);
    for (;;) {
      const req = toBinary(PullSessionListSchema, create(PullSessionListSchema, { cursor, limit: SESSION_PAGE_MAX_LIMIT }));
      const b = await withRetry(() => conn.call(Op.PULL_SESSION_LIST, req, SessionListBatchSchema),
        new Backoff(50, 2000, rt.retryBudgetMs));
      this.noteBadge(b.badge, b.badgeVersion);
      this.apply("server", await rt.store.applySessions(b.sessions));
      this.note(b.sessions);
      if (!b.hasMore || !b.nextCursor.length) break;
      cursor = b.nextCursor;
    }
    this.pulls++;
    for (const [conv, seq, peer] of await rt.store.unconfirmedReads()) {
      try {
        await this.sendMark(conv, seq, peer);
      } catch (e) {
        if (e instanceof ConnectionLost || e instanceof NotConnected) throw e;
        this.apply("server", await rt.store.moveRead(conv, seq, true)); // refused for good: stop asking
      }
    }
  }

  /** Keep (badge, version) when `version` is newer than the one held; tell the app. */
  noteBadge(badge: bigint, version: bigint): void {
    if (version <= this.badge.version) return;
    this.badge = { badge, version };
    this.rt.emit({ type: "badge", badge, version });
  }

  private async onDelta(d: SessionDelta): Promise<void> {
    this.noteBadge(d.badge, d.badgeVersion);
    if (!d.sessions.length) return;
    this.apply("server", await this.rt.store.applySessions(d.sessions));
    this.note(d.sessions);
  }

  private async onReadSync(r: ReadSync): Promise<void> {
    this.apply("sync", await this.rt.store.moveRead(r.conversationId, r.readConversationSeq, true));
  }

  private guard(p: Promise<void>): void {
    p.catch((e) => this.rt.emit({ type: "syncFailed", code: (e as ServerError).code ?? ErrorCode.INTERNAL,
      message: String(e) }));
  }

  /** Move the read position to `seq` (default: the newest message); returns the position held. */
  async markRead(conv: Uint8Array, seq?: bigint): Promise<bigint> {
    const rt = this.rt;
    const entry = await rt.store.conversation(conv);
    const target = seq ?? entry?.lastMessage?.conversationSeq ?? 0n;
    const current = entry?.readConversationSeq ?? 0n;
    if (target <= current) return current;
    this.apply("local", await rt.store.moveRead(conv, target, false));
    if (!rt.connected) return target;
    try {
      await this.sendMark(conv, target, entry?.peerUserId ?? 0n);
    } catch (e) {
      if (!(e instanceof ConnectionLost || e instanceof NotConnected)) throw e; // unconfirmed: sent after the next pull
    }
    const now = await rt.store.conversation(conv);
    return now && now.readConversationSeq > target ? now.readConversationSeq : target;
  }

  private async sendMark(conv: Uint8Array, seq: bigint, peer: bigint): Promise<void> {
    const rt = this.rt;
    const body = toBinary(MarkReadSchema, create(MarkReadSchema, { conversationId: conv, readConversationSeq: seq,
      peerUserId: peer }));
    const reply = await withRetry(() => rt.request(Op.MARK_READ, body), new Backoff(50, 2000, rt.retryBudgetMs));
    const ok = fromBinary(MarkReadOkSchema, reply.body);
    const pos = ok.readConversationSeq > seq ? ok.readConversationSeq : seq; // the server clamps: settled
    this.apply("server", await rt.store.moveRead(conv, pos, true));
  }
}
