/**
 * Quotes of a removed message leave the stored replies (decision 0134 item 2, the qim-js
 * half of qim.sdk's reply index). A reply keeps the frozen quote its sender's server
 * wrote (decision 0120); when the quoted message is recalled or deleted (its RECALL or
 * DELETE notice, or our own RECALL_OK), every stored reply quoting it loses the preview
 * and takes the state, found through the messages' `byReplyTarget` index (the target's
 * id in hex, set only while the quote still has text): no scan. A reply stored while
 * its target is stored removed is stored without the preview.
 */

import { toHex } from "./bytes";
import type { StoredMessage } from "./model";
import { MessageState } from "./protocol";
import { indexed, replyTarget } from "./quotekey";
import type { MessageRow, Tx } from "./storedb";

export { indexed, replyTarget };

export const QUOTE_INDEX = "byReplyTarget";

/** The stored replies quoting `targetId` lose its text and take `state`; the rows changed. */
export async function clearQuotes(tx: Tx, targetId: Uint8Array, state: number): Promise<MessageRow[]> {
  const store = tx.objectStore("messages");
  const rows = await store.index(QUOTE_INDEX).getAll(toHex(targetId));
  const changed: MessageRow[] = [];
  for (const r of rows) {
    const row = indexed({ ...r, reply: { ...r.reply!, state, preview: "" } });
    await store.put(row);
    changed.push(row);
  }
  return changed;
}

/** `m` as it should be stored: without the preview when its target is stored removed. */
export async function quoteAsStored(tx: Tx, m: StoredMessage): Promise<StoredMessage> {
  if (!replyTarget(m)) return m;
  const target = await tx.objectStore("messages").get(toHex(m.reply!.messageId));
  if (!target || target.state === MessageState.NORMAL) return m;
  return { ...m, reply: { ...m.reply!, state: target.state, preview: "" } };
}
