/**
 * The IndexedDB schema of the qim-js LocalStore (with `idb`). One database per
 * (endpoint scope, tenant, user, device): `qim/<scope>/<tenant hex32>/<user>/<device>`.
 * A browser tab is one device (its id is kept in the tab's sessionStorage, so a reload
 * keeps the device, its history, cursor and pending sends; another tab is another
 * device with a database of its own, and READ_SYNC reaches it as any other device).
 *
 * Stores: meta (identity, store nonce, next ordinal, rebuild flag), cursor (lane,
 * shard_epoch, last applied mailbox_seq), messages (by message id; index byConv on
 * [conversation hex, 20-digit seq]), pending (by cmid; index byOrdinal), conversations
 * (the list with server snapshot and derived unread), ops (idempotency keys of
 * create-group and recall). bigint values are stored as they are (structured clone);
 * keys use hex and zero-padded decimal strings (IndexedDB keys cannot be bigint).
 */

import { openDB, type DBSchema, type IDBPDatabase, type IDBPTransaction } from "idb";
import type { LastMessage, PendingSend, StoredMessage } from "./model";
import { indexed } from "./quotekey";

export interface Meta {
  tenant: bigint;
  userId: bigint;
  deviceId: bigint;
  nonce: Uint8Array;
  nextOrdinal: bigint;
  rebuildNeeded: boolean;
}

export interface CursorRow {
  lane: number;
  shardEpoch: number;
  seq: bigint;
}

export interface MessageRow extends StoredMessage {
  id: string;
  conv: string;
  seqKey: string;
  /** The quoted message's id (hex) while the quote has text: index byReplyTarget (quotes.ts). */
  replyTarget?: string;
}

export interface PendingRow extends PendingSend {
  id: string;
  ordinalKey: string;
}

export interface ConvRow {
  id: string;
  conversationId: Uint8Array;
  kind: number;
  peerUserId: bigint;
  groupId: bigint;
  title: string;
  joinedAt: bigint;
  leftAt: bigint;
  readSeq: bigint;
  readConfirmed: bigint;
  headSeq: bigint;
  lastActivityId: Uint8Array | null;
  head: LastMessage | null;
  srvReadSeq: bigint | null;
  srvHeadSeq: bigint;
  srvUnread: number;
  srvExact: boolean;
  complete: boolean;
  unread: number;
  unreadExact: boolean;
  updatedLocalMs: number;
}

/** A media send not yet handed to the sender (mediaoutbox.ts): the file itself (a Blob is
 * stored as it is), until its MEDIA send is pending like text. */
export interface MediaRow {
  id: string;
  conversationId: Uint8Array;
  data: Blob | Uint8Array;
  name: string;
  mime: string;
  keepMetadata: boolean;
  /** The signed MediaRef once uploaded (its MEDIA body), else null. */
  ref: Uint8Array | null;
  createdMs: number;
}

export interface OpRow {
  kind: string;
  key: string;
  cmid: Uint8Array;
  state: "open" | "done" | "failed";
  reply: Uint8Array | null;
}

export interface QimSchema extends DBSchema {
  meta: { key: string; value: Meta };
  cursor: { key: string; value: CursorRow };
  messages: { key: string; value: MessageRow; indexes: { byConv: [string, string]; byReplyTarget: string } };
  pending: { key: string; value: PendingRow; indexes: { byOrdinal: string } };
  conversations: { key: string; value: ConvRow };
  ops: { key: [string, string]; value: OpRow };
  media: { key: string; value: MediaRow };
}

export type Db = IDBPDatabase<QimSchema>;
export type StoreName = "meta" | "cursor" | "messages" | "pending" | "conversations" | "ops" | "media";
export type Tx = IDBPTransaction<QimSchema, StoreName[], "readwrite">;
export const ALL: StoreName[] = ["meta", "cursor", "messages", "pending", "conversations", "ops"];
/** 2 adds the messages' byReplyTarget index (decision 0134), filled from the rows already
 * stored; 3 the media outbox (mediaoutbox.ts). */
export const SCHEMA_VERSION = 3;

/** Open (or create) the database `name`; `terminated`: the browser closed it under the page (deleted). */
export function openQimDb(name: string, factory?: IDBFactory, terminated?: () => void): Promise<Db> {
  const upgrade = async (db: IDBPDatabase<QimSchema>, oldVersion: number, _v: number | null,
    tx: IDBPTransaction<QimSchema, StoreName[], "versionchange">) => {
    if (oldVersion < 1) {
      db.createObjectStore("meta");
      db.createObjectStore("cursor");
      db.createObjectStore("messages", { keyPath: "id" }).createIndex("byConv", ["conv", "seqKey"]);
      db.createObjectStore("pending", { keyPath: "id" }).createIndex("byOrdinal", "ordinalKey");
      db.createObjectStore("conversations", { keyPath: "id" });
      db.createObjectStore("ops", { keyPath: ["kind", "key"] });
    }
    if (oldVersion < 2) {
      const messages = tx.objectStore("messages");
      messages.createIndex("byReplyTarget", "replyTarget");
      for (let c = await messages.openCursor(); c; c = await c.continue()) {
        const row = indexed(c.value);
        if (row.replyTarget !== c.value.replyTarget) await c.update(row);
      }
    }
    if (oldVersion < 3) db.createObjectStore("media", { keyPath: "id" });
  };
  if (factory) {
    // fake-indexeddb in unit tests: idb's openDB uses the global indexedDB
    (globalThis as any).indexedDB = factory;
  }
  return openDB<QimSchema>(name, SCHEMA_VERSION, { upgrade, terminated });
}
