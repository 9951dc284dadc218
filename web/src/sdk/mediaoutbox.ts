/**
 * Pending media sends survive a reload like pending text (issue 40; the qim-js half of
 * qim.sdk's media outbox, decision 0147). `client.sendMedia` records the file (a Blob is
 * stored as it is) before it uploads, the signed reference once uploaded, and removes the
 * row once its MEDIA send is pending (the pending send then survives as text does). A
 * page closed or reloaded meanwhile leaves the row: `resumeMedia` on the next start
 * uploads it again (or reuses the recorded reference) and sends it, once: a row whose
 * reference is already a pending send or a stored message was handed on before the
 * reload and is only removed. A send that fails while the page is open removes its row
 * (the page shows the refusal with Retry/Remove: a retry records it again), so nothing is
 * sent behind the person's back after a refusal.
 */

import { equalBytes, toHex } from "./bytes";
import type { LocalStore } from "./store";
import type { MediaRow } from "./storedb";

export type { MediaRow };

/** The media rows of `store`, oldest first. */
export async function mediaRows(store: LocalStore): Promise<MediaRow[]> {
  const rows = await store.database.getAll("media");
  return rows.sort((a, b) => a.createdMs - b.createdMs);
}

/** Record a media send about to upload; its row id. */
export async function recordMedia(store: LocalStore, row: Omit<MediaRow, "id" | "ref" | "createdMs">): Promise<string> {
  const id = toHex(crypto.getRandomValues(new Uint8Array(16)));
  await store.database.put("media", { ...row, id, ref: null, createdMs: Date.now() });
  return id;
}

/** The upload is done: its signed reference (the MEDIA body) is kept with the row. */
export async function uploadedMedia(store: LocalStore, id: string, ref: Uint8Array): Promise<void> {
  const tx = store.database.transaction("media", "readwrite");
  const row = await tx.store.get(id);
  if (row) await tx.store.put({ ...row, ref });
  await tx.done;
}

/** The row is done with (its send is pending, or it failed in front of the person). */
export async function forgetMedia(store: LocalStore, id: string): Promise<void> {
  await store.database.delete("media", id);
}

/** Whether `row`'s MEDIA send was handed on before a reload: a pending send (any state)
 * or a stored message of its conversation carries its reference. */
export async function handedOn(store: LocalStore, row: MediaRow): Promise<boolean> {
  if (!row.ref) return false;
  const pending = await store.pendingSends(["pending", "acked", "committed", "failed"], row.conversationId);
  if (pending.some((p) => equalBytes(p.body, row.ref!))) return true;
  return (await store.messages(row.conversationId, 0n, 200)).some((m) => equalBytes(m.body, row.ref!));
}
