/**
 * The health of a LocalStore's IndexedDB (docs/sdk.md "qim-js", "Storage"). A write can
 * fail because the origin's quota is used up (QuotaExceededError: "full") or because the
 * database was deleted or force-closed under the page (Clear site data, DevTools, the
 * browser's storage pressure: "lost"; every later transaction would throw "The database
 * connection is closing"). Both are StorageTrouble, told once per change through
 * `onChange`; the first transaction that stores a message or a send afterwards tells
 * null (healthy again: a small write that fits says nothing of the batch that did not).
 * A lost database is re-opened under the same name (empty: a new store nonce, cursor 0,
 * so the next sync fills it from the server as it fills a new device's).
 */

import { StorageTrouble, StoreError } from "./errors";
import { openQimDb, type Db, type Meta } from "./storedb";

/** 16 random non-zero bytes: a store's nonce (ids.ts clientMessageId). */
export function randomNonce(): Uint8Array {
  const n = new Uint8Array(16);
  do crypto.getRandomValues(n); while (n.every((x) => x === 0));
  return n;
}

/** The StoreError a failed IndexedDB call stands for. */
export function storeErrorOf(e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const name = (e as DOMException | null)?.name ?? "";
  const message = (e as Error | null)?.message ?? String(e);
  if (name === "QuotaExceededError") return new StorageTrouble("full", `browser storage is full: ${message}`);
  if (name === "InvalidStateError" || /connection is closing|database.*closed/i.test(message)) {
    return new StorageTrouble("lost", `the browser's copy of this device's messages was deleted: ${message}`);
  }
  return new StoreError(`transaction failed: ${message}`);
}

/** Trouble (or health) transitions of one store. */
export class StoreHealth {
  trouble: StorageTrouble | null = null;
  /** Told on every change: the trouble, or null once a transaction commits again. */
  onChange: (trouble: StorageTrouble | null) => void = () => undefined;
  /** Told after a lost database was re-opened (empty): the runtime syncs again. */
  onReopened: () => void = () => undefined;

  /** A transaction failed with `e`: the error to throw (trouble told when it is new). */
  failed(e: unknown): StoreError {
    const err = storeErrorOf(e);
    if (err instanceof StorageTrouble && (this.trouble?.kind !== err.kind)) {
      this.trouble = err;
      this.onChange(err);
    }
    return err;
  }

  /** A lost database was opened again (empty): healthy, and the runtime syncs again. */
  reopened(): void {
    this.ok();
    this.onReopened();
  }

  /** A transaction committed: healthy again (told once). */
  ok(): void {
    if (!this.trouble) return;
    this.trouble = null;
    this.onChange(null);
  }
}

/** Delays between the attempts to re-open a lost database (ms): while the browser is
 * still deleting it, an open fails with AbortError ("The connection was closed"). */
export const REOPEN_DELAYS_MS = [250, 500, 1000, 2000, 4000];

/**
 * Re-open database `name` after it was lost (attempts REOPEN_DELAYS_MS apart); its meta
 * (same identity, a new random nonce so no client_message_id of the lost store is drawn
 * again, ordinal 0) is written when the database came back empty. Throws what the last
 * attempt threw.
 */
export async function reopenDb(name: string, identity: Meta, nonce: Uint8Array,
  onTerminated: () => void): Promise<[Db, Meta]> {
  for (let i = 0; ; i++) {
    await new Promise((r) => setTimeout(r, REOPEN_DELAYS_MS[i]));
    try {
      return await openMeta(name, identity, nonce, onTerminated);
    } catch (e) {
      if (i + 1 >= REOPEN_DELAYS_MS.length) throw e;
    }
  }
}

async function openMeta(name: string, identity: Meta, nonce: Uint8Array, onTerminated: () => void): Promise<[Db, Meta]> {
  const db = await openQimDb(name, undefined, onTerminated);
  const tx = db.transaction("meta", "readwrite");
  let meta = await tx.store.get("meta");
  if (!meta) {
    meta = { ...identity, nonce, nextOrdinal: 0n, rebuildNeeded: false };
    await tx.store.put(meta, "meta");
  }
  await tx.done;
  return [db, meta];
}
