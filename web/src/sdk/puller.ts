/**
 * Mailbox pulls, inline pushes and REBUILD of one runtime (qim.sdk.puller, qim.sdk.rebuild).
 *
 * Single flight, never losing a wake-up: every request (a PUSH_EVENTS, the connect-time
 * sync, an explicit pull) sets a dirty mark and a running flight loops again while it is
 * set. What reaches the store is a MAILBOX_BATCH page or an inline push applied as one.
 * A push is a position (lane, mailbox_seq; decision 0033): one the committed cursor
 * already covers asks for nothing (stats.pushesSkipped), as in qim.sdk. An inline push
 * (decision 0156: inline_entries with the user's prev_mailbox_seq on that lane) of a
 * synced device waits for the single flight (started if none runs; never beside a
 * page) and is then applied exactly as MailboxBatch{inline_entries,
 * next_cursor=mailbox_seq, lane, shard_epoch=mailbox_seq >> 48, has_more=false} (the
 * same store call, app events and pulled handlers; stats.pushesApplied) only when the
 * store's committed cursor at that moment, after any page before it, is on that lane
 * and shard_epoch at exactly prev_mailbox_seq (every entry at mailbox_seq, a text never
 * without its body). Anything else (a gap, no inline entries, another lane, mailbox_seq
 * 0, a device still syncing) pulls, which brings the same entries. Transient errors are
 * retried with bounded backoff; CURSOR_EXPIRED runs REBUILD: the session list, then for
 * every listed or held conversation its history NEWER from just below the lowest stored
 * seq to the end (new messages stored, states applied, rows history did not return
 * removed), and only then the cursor restarts from 0. A background flight that fails
 * tells syncFailed.
 */

import { create, toBinary } from "@bufbuild/protobuf";
import { ErrorCode } from "../gen/qim/v1/common_pb";
import { HistoryBatchSchema, HistoryDirection, PullHistorySchema } from "../gen/qim/v1/history_pb";
import { MailboxBatchSchema, PullMailboxSchema, type MailboxEntry, type PushEvents } from "../gen/qim/v1/mailbox_pb";
import { PullSessionListSchema, SessionListBatchSchema, type SessionEntry } from "../gen/qim/v1/session_pb";
import { fromHex, toHex } from "./bytes";
import type { Connection } from "./connection";
import { ConnectionLost, NotConnected, ServerError, StorageTrouble } from "./errors";
import { conversationKind, KIND_GROUP } from "./ids";
import { EventType, HISTORY_PAGE_MAX_BYTES, HISTORY_PAGE_MAX_LIMIT, MAILBOX_PAGE_MAX_BYTES, MAILBOX_PAGE_MAX_ENTRIES,
  MessageState, Op, SESSION_PAGE_MAX_LIMIT } from "./protocol";
import { Backoff, withRetry } from "./retry";
import type { RuntimeCore } from "./core";

/** The shard_epoch of a mailbox_seq: its top 16 bits (docs/design.md, mailbox_seq). */
const shardEpochOf = (mailboxSeq: bigint): number => Number(mailboxSeq >> 48n);
/** Inline pushes waiting for the flight; beyond, the oldest is dropped and pulled instead. */
const INLINE_QUEUE_MAX = 256;

/**
 * An inline entry fit to apply: at the pushed mailbox_seq and, when it shows a text (a
 * MESSAGE or an EDIT not recalled or deleted), with its body. The server inlines only
 * bodies carried inline (decision 0156); one without would show an empty message, so
 * it is pulled instead (the pull fills a referenced body).
 */
function whole(e: MailboxEntry, mailboxSeq: bigint): boolean {
  const shows = (e.eventType === EventType.MESSAGE || e.eventType === EventType.EDIT) && e.state === MessageState.NORMAL;
  return e.mailboxSeq === mailboxSeq && !(shows && e.body.length === 0);
}

/** The single flight of PULL_MAILBOX pages and inline pushes, with dirty marks, retries and REBUILD. */
export class Puller {
  private running: Promise<void> | null = null;
  private dirty = false;
  /** (lane, last applied mailbox_seq) as committed to the store; null while unknown. */
  private position: { lane: number; seq: bigint } | null = null;
  /** Inline pushes waiting for the single flight, in arrival order. */
  private inline: PushEvents[] = [];

  constructor(private readonly rt: RuntimeCore) {}

  /**
   * A PUSH_EVENTS frame: nothing when the committed cursor covers its position (same
   * lane, mailbox_seq at or below; counted in stats.pushesSkipped); an inline push of a
   * synced device waits for the single flight (started when none runs), which applies
   * it when the cursor check holds then (applyInline) or pulls; anything else wake().
   */
  notify(push: PushEvents): void {
    const pos = this.position;
    if (push.mailboxSeq && pos && pos.lane === push.lane && push.mailboxSeq <= pos.seq) {
      this.rt.stats.pushesSkipped++;
      return;
    }
    // Not before the sync ends (a REBUILD may be about to reset the cursor): its pull covers it.
    if (push.mailboxSeq && push.inlineEntries.length && this.rt.connected) {
      if (this.inline.length >= INLINE_QUEUE_MAX) {
        this.inline.shift();
        this.dirty = true; // its position is still wanted: the pull brings it
      }
      this.inline.push(push);
      if (!this.running && this.rt.conn?.open) this.background();
      return;
    }
    this.wake();
  }

  /** A notification: pull soon; never lost (a running flight runs again). */
  wake(): void {
    this.dirty = true;
    if (!this.running && this.rt.conn?.open) this.background();
  }

  /** A flight nobody awaits. */
  private background(): void {
    const rt = this.rt;
    this.start().catch((e) => {
      if (e instanceof ConnectionLost || e instanceof NotConnected) return; // the reconnect syncs again
      if (e instanceof StorageTrouble || rt.store.health.trouble) return; // told as "storage"; the watch pulls again
      rt.emit({ type: "syncFailed", code: (e as ServerError).code ?? ErrorCode.INTERNAL, message: String(e) });
    });
  }

  /** Pull until has_more is false, joining a running pull (it runs again). */
  pull(): Promise<void> {
    this.dirty = true;
    return this.running ?? this.start();
  }

  /**
   * The single flight: the waiting inline pushes (each applied or, on a gap, a pull
   * wanted), then pages while dirty, again until neither is left.
   */
  private start(): Promise<void> {
    let ended = false; // a flight with nothing to do ends before `running` is set: never leave it set
    const run = (async () => {
      try {
        for (;;) {
          while (this.inline.length) {
            if (!(await this.applyInline(this.inline.shift()!))) this.dirty = true; // a gap: the pull brings it
          }
          if (!this.dirty) break;
          this.dirty = false;
          while (await this.page());
        }
      } finally {
        ended = true;
        this.running = null;
      }
    })();
    if (!ended) this.running = run;
    return run;
  }

  /**
   * One inline push inside the flight (decision 0156): true when applied (as a
   * MAILBOX_BATCH page to mailbox_seq; stats.pushesApplied) or already covered, false
   * when the store's committed cursor is not (lane, shard_epoch of mailbox_seq,
   * prev_mailbox_seq) or an entry is not whole(): an entry past a gap is never applied,
   * a pull is due instead.
   */
  private async applyInline(push: PushEvents): Promise<boolean> {
    const rt = this.rt;
    const epoch = shardEpochOf(push.mailboxSeq);
    const cursor = await rt.store.cursor(); // the committed one: position may lag a REBUILD
    const same = cursor !== null && cursor.lane === push.lane && cursor.shardEpoch === epoch;
    if (same && cursor.seq >= push.mailboxSeq) {
      rt.stats.pushesSkipped++;
      return true;
    }
    if (!same || cursor.seq !== push.prevMailboxSeq || !push.inlineEntries.every((e) => whole(e, push.mailboxSeq))) {
      return false;
    }
    await this.applyPage(push.inlineEntries, push.mailboxSeq, push.lane, epoch);
    rt.stats.pushesApplied++;
    return true;
  }

  private async page(): Promise<boolean> {
    const rt = this.rt;
    const conn = rt.conn;
    if (!conn || !conn.open) throw new NotConnected("no connection");
    const cursor = await rt.store.cursor();
    const body = toBinary(PullMailboxSchema, create(PullMailboxSchema, { cursor: cursor?.seq ?? 0n,
      maxEntries: MAILBOX_PAGE_MAX_ENTRIES, maxBytes: MAILBOX_PAGE_MAX_BYTES }));
    let batch;
    try {
      batch = await withRetry(() => conn.call(Op.PULL_MAILBOX, body, MailboxBatchSchema, rt.sendTimeoutMs),
        new Backoff(50, 2000, rt.retryBudgetMs));
    } catch (e) {
      if (!(e instanceof ServerError) || e.code !== ErrorCode.CURSOR_EXPIRED) throw e;
      await this.rebuild(conn);
      return true;
    }
    await this.applyPage(batch.entries, batch.nextCursor, batch.lane, batch.shardEpoch);
    return batch.hasMore;
  }

  /** One page (pulled, or an inline push): entries and cursor in one transaction, then told. */
  private async applyPage(entries: MailboxEntry[], nextCursor: bigint, lane: number, shardEpoch: number): Promise<void> {
    const rt = this.rt;
    const result = await rt.store.applyMailboxBatch(entries, nextCursor, lane, shardEpoch);
    const committed = await rt.store.cursor(); // what a later push is compared with (notify)
    for (const h of rt.pulledHandlers) h(entries); // summaries ride with the entries (decision 0121 §4)
    this.position = committed && { lane: committed.lane, seq: committed.seq };
    rt.tell(result);
  }

  /** REBUILD on `conn` (module docstring); tells the app what changed, page by page. */
  async rebuild(conn: Connection): Promise<void> {
    const rt = this.rt;
    const call = <T>(fn: () => Promise<T>) => withRetry(fn, new Backoff(50, 2000, rt.retryBudgetMs));
    const sessions = new Map<string, SessionEntry>();
    let cursor: Uint8Array = new Uint8Array(0);
    for (;;) {
      const req = toBinary(PullSessionListSchema, create(PullSessionListSchema, { cursor, limit: SESSION_PAGE_MAX_LIMIT }));
      const b = await call(() => conn.call(Op.PULL_SESSION_LIST, req, SessionListBatchSchema));
      for (const s of b.sessions) sessions.set(toHex(s.conversationId), s);
      if (!b.hasMore || !b.nextCursor.length) break;
      cursor = b.nextCursor;
    }
    const held = await rt.store.conversationsHeld();
    const convs = [...sessions.keys(), ...[...held.keys()].filter((c) => !sessions.has(c))];
    for (const c of convs) {
      const [low, hint] = held.get(c) ?? [1n, 0n];
      const peer = sessions.get(c)?.peerUserId || hint;
      const conv = fromHex(c);
      try {
        await this.reconcile(conn, conv, peer, low - 1n, call);
      } catch (e) {
        if (!(e instanceof ServerError) || e.code !== ErrorCode.FORBIDDEN || sessions.has(c)) throw e;
        if (conversationKind(conv) !== KIND_GROUP) continue; // a direct one whose peer we cannot name
        rt.tell(await rt.store.removeAbsent(conv, -1n, new Set())); // no member interval at all
      }
    }
    await rt.store.resetCursor();
    this.position = null;
    rt.stats.rebuilds++;
    rt.emit({ type: "cursorReset" });
  }

  private async reconcile(conn: Connection, conv: Uint8Array, peer: bigint, above: bigint,
    call: <T>(fn: () => Promise<T>) => Promise<T>): Promise<void> {
    const seen = new Set<string>();
    let anchor = above < 0n ? 0n : above;
    for (;;) {
      const req = toBinary(PullHistorySchema, create(PullHistorySchema, { conversationId: conv, peerUserId: peer,
        anchorSeq: anchor, direction: HistoryDirection.NEWER, limit: HISTORY_PAGE_MAX_LIMIT,
        maxBytes: HISTORY_PAGE_MAX_BYTES }));
      const page = await call(() => conn.call(Op.PULL_HISTORY, req, HistoryBatchSchema));
      for (const it of page.items) seen.add(toHex(it.messageId));
      this.rt.tell(await this.rt.store.applyHistory(conv, page.items));
      if (!page.hasMore || !page.items.length) break;
      anchor = page.nextAnchor;
    }
    this.rt.tell(await this.rt.store.removeAbsent(conv, above, seen));
  }
}
