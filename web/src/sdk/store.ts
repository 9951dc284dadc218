/**
 * LocalStore of qim-js: the device's IndexedDB database (schema: storedb.ts), the
 * counterpart of qim.sdk.store. A send is stored as pending (its cmid reserved from
 * the store's ordinal) before anything leaves; a MAILBOX_BATCH (or the page an inline
 * push stands for, decision 0156) is applied with its cursor in ONE transaction (any
 * failure leaves messages, pending and cursor as they were); every change returns an
 * ApplyResult that the runtime tells the app after the commit. StoreError for another
 * identity's store or a cursor moving backwards.
 */

import type { HistoryItem } from "../gen/qim/v1/history_pb";
import type { MailboxEntry } from "../gen/qim/v1/mailbox_pb";
import type { SessionEntry } from "../gen/qim/v1/session_pb";
import { fromHex, seqKey, toHex, U64_MAX } from "./bytes";
import { StorageTrouble, StoreError } from "./errors";
import { clientMessageId, conversationKind, endpointScope, KIND_DIRECT } from "./ids";
import { emptyResult, type ApplyResult, type Conversation, type PendingSend, type PendingState, type Resolved,
  type StoredMessage } from "./model";
import type { SendExtras } from "./model";
import { MessageState } from "./protocol";
import { applyHistoryItems, applyMailboxEntries, applySessionEntry } from "./storeapply";
import { ALL, openQimDb, type CursorRow, type Db, type Meta, type OpRow, type Tx } from "./storedb";
import { randomNonce, reopenDb, StoreHealth } from "./storehealth";
import { headOf, ListTx, toConversation } from "./storelist";

function strip<T extends { id: string }>(row: T, ...keys: string[]): Omit<T, "id"> {
  const copy: Record<string, unknown> = { ...row };
  for (const k of ["id", ...keys]) delete copy[k];
  return copy as Omit<T, "id">;
}

/** The IndexedDB store of one (endpoint, tenant, user, device). */
export class LocalStore {
  /** Storage trouble (full, lost) as it comes and goes (storehealth.ts). */
  readonly health = new StoreHealth();

  private constructor(private db: Db, readonly name: string, readonly meta: Meta) {}

  /** The open database, for the side tables kept beside the store's own (mediaoutbox.ts). */
  get database(): Db {
    return this.db;
  }

  /** The database name of an identity (storedb.ts). */
  static nameFor(endpoint: string, tenant: bigint, userId: bigint, deviceId: bigint): string {
    return `qim/${endpointScope(endpoint)}/${tenant.toString(16).padStart(32, "0")}/${userId}/${deviceId}`;
  }

  /** Open or create; an existing store of another identity is a StoreError. */
  static async open(endpoint: string, tenant: bigint, userId: bigint, deviceId: bigint,
    factory?: IDBFactory): Promise<LocalStore> {
    if (userId <= 0n || userId > U64_MAX || deviceId <= 0n || deviceId > U64_MAX) {
      throw new StoreError("user and device must be non-zero u64");
    }
    const name = LocalStore.nameFor(endpoint, tenant, userId, deviceId);
    let store: LocalStore | null = null;
    const db = await openQimDb(name, factory, () => void store?.lost());
    const tx = db.transaction("meta", "readwrite");
    let meta = await tx.store.get("meta");
    if (!meta) {
      meta = { tenant, userId, deviceId, nonce: randomNonce(), nextOrdinal: 0n, rebuildNeeded: false };
      await tx.store.put(meta, "meta");
    }
    await tx.done;
    if (meta.tenant !== tenant || meta.userId !== userId || meta.deviceId !== deviceId) {
      db.close();
      throw new StoreError(`store ${name} belongs to user ${meta.userId} device ${meta.deviceId}`);
    }
    return (store = new LocalStore(db, name, meta));
  }

  /** The database was deleted or closed under the page: tell it, re-open it empty (storehealth.ts). */
  private async lost(): Promise<void> {
    this.health.failed(new StorageTrouble("lost", "the browser deleted this device's stored messages"));
    const got = await reopenDb(this.name, this.meta, randomNonce(), () => void this.lost()).catch(() => null);
    if (!got) return; // stays "lost": the app offers a reload
    [this.db] = got;
    Object.assign(this.meta, got[1]);
    this.health.reopened();
  }

  get userId(): bigint {
    return this.meta.userId;
  }

  /** Close the database. */
  close(): void {
    this.db.close();
  }

  private tx(): Tx {
    return this.db.transaction(ALL, "readwrite");
  }

  /** Run `fn` in one readwrite transaction over every store; StoreError (rolled back) on failure.
   * `heals`: its commit ends storage trouble (a message or a send stored, not any small write). */
  async transact<T>(fn: (tx: Tx) => Promise<T>, heals = false): Promise<T> {
    let tx: Tx | null = null;
    try {
      tx = this.tx();
      const out = await fn(tx);
      await tx.done;
      if (heals) this.health.ok();
      return out;
    } catch (e) {
      tx?.done.catch(() => undefined); // the abort below rejects it: nothing is written
      try {
        tx?.abort();
      } catch {
        // already finished: nothing to roll back
      }
      throw this.health.failed(e); // a StoreError; StorageTrouble (full, lost) is also told
    }
  }

  // --- pending sends ---------------------------------------------------------------
  /** Reserve a cmid (the next ordinal) and store the pending row, before anything is sent. */
  addPending(conv: Uint8Array, recipient: bigint, messageType: number, customType: Uint8Array,
    body: Uint8Array, extras?: SendExtras): Promise<PendingSend> {
    return this.transact(async (tx) => {
      const meta = (await tx.objectStore("meta").get("meta"))!;
      const ordinal = meta.nextOrdinal;
      await tx.objectStore("meta").put({ ...meta, nextOrdinal: ordinal + 1n }, "meta");
      const row: PendingSend = { clientMessageId: clientMessageId(meta.nonce, meta.deviceId, ordinal), ordinal,
        conversationId: conv, recipientUserId: recipient, messageType, customType, body, createdLocalMs: Date.now(),
        state: "pending", messageId: null, conversationSeq: 0n, failure: "", ...(extras ? { extras } : {}) };
      await tx.objectStore("pending").put({ ...row, id: toHex(row.clientMessageId), ordinalKey: seqKey(ordinal) });
      const list = new ListTx(tx, this.userId);
      await list.row(conv, recipient);
      await list.finish(emptyResult());
      return row;
    }, true);
  }

  /** Pending rows in the given states, oldest ordinal first (of one conversation when given). */
  async pendingSends(states: PendingState[] = ["pending"], conv?: Uint8Array): Promise<PendingSend[]> {
    const rows = await this.db.getAllFromIndex("pending", "byOrdinal");
    const want = conv ? toHex(conv) : null;
    return rows.filter((r) => states.includes(r.state) && (want === null || toHex(r.conversationId) === want))
      .map((r) => strip(r, "ordinalKey") as PendingSend);
  }

  /** Record a SEND_ACK: the message becomes the head, the conversation read up to it. */
  markAcked(r: Resolved): Promise<ApplyResult> {
    return this.transact(async (tx) => {
      const store = tx.objectStore("pending");
      const p = await store.get(toHex(r.clientMessageId));
      if (!p || (p.state !== "pending" && p.state !== "failed")) return emptyResult();
      // a body moderation replaced (decision 0126): the row shows what was committed
      const body = r.body ?? p.body;
      await store.put({ ...p, body, state: "acked", messageId: r.messageId, conversationSeq: r.conversationSeq });
      const list = new ListTx(tx, this.userId);
      const row = await list.row(r.conversationId, p.recipientUserId);
      if (row) {
        list.advanceHead(row, headOf(r.messageId, r.conversationSeq, this.userId, r.createdAtMs, p.messageType, body,
          MessageState.NORMAL));
        list.moveRead(row, r.conversationSeq, true);
      }
      return list.finish(emptyResult());
    });
  }

  /** A permanent refusal: never resent, body kept for the app. True when it was pending. */
  markFailed(cmid: Uint8Array, failure: string): Promise<boolean> {
    return this.transact(async (tx) => {
      const p = await tx.objectStore("pending").get(toHex(cmid));
      if (!p || p.state !== "pending") return false;
      await tx.objectStore("pending").put({ ...p, state: "failed", failure });
      return true;
    });
  }

  // --- mailbox ---------------------------------------------------------------------
  /** The cursor, or null before the first batch. */
  async cursor(): Promise<CursorRow | null> {
    return (await this.db.get("cursor", "cursor")) ?? null;
  }

  /** Entries, pending resolution and the cursor in ONE transaction. */
  applyMailboxBatch(entries: MailboxEntry[], nextCursor: bigint, lane: number, shardEpoch: number): Promise<ApplyResult> {
    return this.transact(async (tx) => {
      const out = emptyResult();
      const list = new ListTx(tx, this.userId);
      await applyMailboxEntries(list, entries, out);
      await list.finish(out);
      const old = await tx.objectStore("cursor").get("cursor");
      if (old && old.lane === lane && old.shardEpoch === shardEpoch && nextCursor < old.seq) {
        throw new StoreError("mailbox cursor would move backwards");
      }
      await tx.objectStore("cursor").put({ lane, shardEpoch, seq: nextCursor }, "cursor");
      return out;
    }, entries.length > 0);
  }

  /** One HISTORY_BATCH page (back-fill or REBUILD); the cursor is not touched. */
  applyHistory(conv: Uint8Array, items: HistoryItem[]): Promise<ApplyResult> {
    return this.transact(async (tx) => {
      const out = emptyResult();
      const list = new ListTx(tx, this.userId);
      await applyHistoryItems(list, conv, items, out);
      return list.finish(out);
    });
  }

  /** After a complete history walk above `aboveSeq`: delete rows it did not return. */
  removeAbsent(conv: Uint8Array, aboveSeq: bigint, seen: Set<string>): Promise<ApplyResult> {
    return this.transact(async (tx) => {
      const out = emptyResult();
      const c = toHex(conv);
      const from = aboveSeq < 0n ? "" : seqKey(aboveSeq + 1n);
      const idx = tx.objectStore("messages").index("byConv");
      const rows = await idx.getAll(IDBKeyRange.bound([c, from], [c, "\uffff"]));
      for (const m of rows) {
        if (seen.has(m.id)) continue;
        await tx.objectStore("messages").delete(m.id);
        out.removed.push(m.messageId);
      }
      const list = new ListTx(tx, this.userId);
      const row = await list.row(conv);
      if (row && out.removed.length && row.lastActivityId && out.removed.some((x) => toHex(x) === toHex(row.lastActivityId!))) {
        Object.assign(row, { headSeq: 0n, lastActivityId: null, head: null });
        const newest = (await idx.getAll(IDBKeyRange.bound([c, ""], [c, "\uffff"]))).pop();
        if (newest) list.advanceHead(row, headOf(newest.messageId, newest.conversationSeq, newest.senderId,
          newest.createdAtMs, newest.messageType, newest.body, newest.state));
      }
      return list.finish(out);
    });
  }

  /** True when the next connect must REBUILD first. */
  async rebuildNeeded(): Promise<boolean> {
    return (await this.db.get("meta", "meta"))!.rebuildNeeded;
  }

  /** After a REBUILD: the next pull starts from 0 (which never expires); messages stay. */
  resetCursor(): Promise<void> {
    return this.transact(async (tx) => {
      await tx.objectStore("cursor").delete("cursor");
      const meta = (await tx.objectStore("meta").get("meta"))!;
      await tx.objectStore("meta").put({ ...meta, rebuildNeeded: false }, "meta");
    });
  }

  // --- the list ----------------------------------------------------------------------
  /** SESSION_LIST_BATCH / SESSION_DELTA entries (absolute values). */
  applySessions(entries: SessionEntry[]): Promise<ApplyResult> {
    return this.transact(async (tx) => {
      const list = new ListTx(tx, this.userId);
      for (const e of entries) await applySessionEntry(list, e);
      return list.finish(emptyResult());
    });
  }

  /** Read position forward only; `confirmed`: the server holds it. */
  moveRead(conv: Uint8Array, seq: bigint, confirmed: boolean): Promise<ApplyResult> {
    return this.transact(async (tx) => {
      const list = new ListTx(tx, this.userId);
      const row = await list.row(conv);
      if (row) list.moveRead(row, seq, confirmed);
      return list.finish(emptyResult());
    });
  }

  /** [conversation, read position, peer] of positions moved here but not confirmed. */
  async unconfirmedReads(): Promise<[Uint8Array, bigint, bigint][]> {
    const rows = await this.db.getAll("conversations");
    return rows.filter((r) => r.readSeq > r.readConfirmed).map((r) => [r.conversationId, r.readSeq, r.peerUserId]);
  }

  /** The list, newest activity first. */
  async conversations(): Promise<Conversation[]> {
    const rows = await this.db.getAll("conversations");
    const at = (r: (typeof rows)[number]) => r.head?.createdAtMs ?? 0n;
    rows.sort((a, b) => (at(b) > at(a) ? 1 : at(b) < at(a) ? -1 : b.updatedLocalMs - a.updatedLocalMs));
    return rows.map(toConversation);
  }

  /** One entry, or null. */
  async conversation(conv: Uint8Array): Promise<Conversation | null> {
    const r = await this.db.get("conversations", toHex(conv));
    return r ? toConversation(r) : null;
  }

  // --- messages --------------------------------------------------------------------
  /** Up to `limit` stored messages with seq < beforeSeq (0: newest), in seq order. */
  async messages(conv: Uint8Array, beforeSeq = 0n, limit = 50): Promise<StoredMessage[]> {
    const c = toHex(conv);
    const hi = beforeSeq > 0n ? seqKey(beforeSeq) : "\uffff";
    const range = IDBKeyRange.bound([c, ""], [c, hi], false, beforeSeq > 0n);
    const out: StoredMessage[] = [];
    let cur = await this.db.transaction("messages").store.index("byConv").openCursor(range, "prev");
    while (cur && out.length < limit) {
      out.push(strip(cur.value, "conv", "seqKey") as StoredMessage);
      cur = await cur.continue();
    }
    return out.reverse();
  }

  /** conversation hex → [lowest stored seq, a peer or 0]: what REBUILD checks against history. */
  async conversationsHeld(): Promise<Map<string, [bigint, bigint]>> {
    const out = new Map<string, [bigint, bigint]>();
    const rows = await this.db.getAll("messages");
    const pend = await this.db.getAll("pending");
    for (const m of rows) {
      const got = out.get(m.conv);
      const low = got && got[0] < m.conversationSeq ? got[0] : m.conversationSeq;
      let peer = got?.[1] ?? 0n;
      if (!peer && conversationKind(m.conversationId) === KIND_DIRECT && m.senderId !== this.userId) peer = m.senderId;
      out.set(m.conv, [low, peer]);
    }
    for (const [c, [low, peer]] of out) {
      if (peer || conversationKind(fromHex(c)) !== KIND_DIRECT) continue;
      const p = pend.find((x) => toHex(x.conversationId) === c && x.recipientUserId);
      if (p) out.set(c, [low, p.recipientUserId]);
    }
    return out;
  }

  // --- idempotency keys (create group, recall) ---------------------------------------
  /** The cmid of operation (kind, key): an open one keeps its cmid; a done one replays its reply. */
  async opBegin(kind: string, key: string, replay: boolean): Promise<[Uint8Array, Uint8Array | null]> {
    const got = await this.db.get("ops", [kind, key]);
    if (got && got.state === "open") return [got.cmid, null];
    if (got && got.state === "done" && replay) return [got.cmid, got.reply];
    return this.transact(async (tx) => {
      const meta = (await tx.objectStore("meta").get("meta"))!;
      await tx.objectStore("meta").put({ ...meta, nextOrdinal: meta.nextOrdinal + 1n }, "meta");
      const row: OpRow = { kind, key, cmid: clientMessageId(meta.nonce, meta.deviceId, meta.nextOrdinal),
        state: "open", reply: null };
      await tx.objectStore("ops").put(row);
      return [row.cmid, null] as [Uint8Array, null];
    });
  }

  /** Record the answer (done) or a permanent error (null: the next call is a new operation). */
  async opEnd(kind: string, key: string, cmid: Uint8Array, reply: Uint8Array | null): Promise<void> {
    await this.db.put("ops", { kind, key, cmid, state: reply ? "done" : "failed", reply });
  }
}
