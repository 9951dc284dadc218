/**
 * The key of the messages' `byReplyTarget` index (decision 0134; quotes.ts uses it):
 * the quoted message's id in hex while the stored reply's quote still has text. Apart
 * from quotes.ts so the schema (storedb.ts) can fill it on upgrade without an import
 * circle.
 */

import { toHex } from "./bytes";
import type { StoredMessage } from "./model";
import { MessageState } from "./protocol";

/** The index key of a row: the quoted message's id while the quote has text, else undefined. */
export function replyTarget(m: StoredMessage): string | undefined {
  return m.reply && m.reply.preview && m.reply.state === MessageState.NORMAL ? toHex(m.reply.messageId) : undefined;
}

/** `row` with its index key recomputed (an absent key keeps the row out of the index). */
export function indexed<R extends StoredMessage & { replyTarget?: string }>(row: R): R {
  const target = replyTarget(row);
  const out = { ...row, replyTarget: target };
  if (target === undefined) delete out.replyTarget;
  return out;
}
