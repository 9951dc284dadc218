/**
 * Replies, mentions and edits in qim-js (docs/decisions/0120; docs/sdk.md "Replies,
 * mentions and edits"): the send options, what a stored message carries, and the EDIT
 * notice. The server quotes the replied message (ReplyRef); an edit is a newer version
 * of the body that never goes back to an older one, and a recalled copy never takes a
 * body again.
 */

import { fromBinary } from "@bufbuild/protobuf";
import { ControlEventSchema } from "../gen/qim/v1/message_pb";
import type { SendExtras, StoredMessage } from "./model";
import { MessageState } from "./protocol";

/** What a MailboxEntry or HistoryItem carries besides the message (fields 14-18 / 11-15). */
interface WireExtras {
  reply?: { messageId: Uint8Array; conversationSeq: bigint; senderId: bigint; messageType: number; state: number;
    preview: string };
  mentionUserIds: bigint[];
  mentionAll: boolean;
  version: number;
  editedAtMs: bigint;
}

/** The StoredMessage fields of a wire entry or item. */
export function extrasOf(w: WireExtras): Pick<StoredMessage, "reply" | "mentions" | "mentionAll" | "version" |
  "editedAtMs"> {
  const r = w.reply;
  return { reply: r ? { messageId: r.messageId, conversationSeq: r.conversationSeq, senderId: r.senderId,
    messageType: r.messageType, state: r.state, preview: r.preview } : null,
  mentions: [...w.mentionUserIds], mentionAll: w.mentionAll, version: w.version, editedAtMs: w.editedAtMs };
}

/** SendMessage fields 9-11 of the options (checked: SendRefused text, or null when fine). */
export function checkExtras(x: SendExtras): string | null {
  if (x.replyTo && (x.replyTo.length !== 16 || x.replyTo.every((b) => b === 0))) return "replyTo must be a message id";
  const m = x.mentions ?? [];
  if (m.length > 50) return "more than 50 mentioned users";
  if (new Set(m.map(String)).size !== m.length || m.some((u) => u <= 0n || u >= 1n << 63n)) {
    return "mentions must be distinct user ids";
  }
  return null;
}

/** An EDIT notice's (message id, version, body, time), null when the body is not one. */
export function editOf(body: Uint8Array): { messageId: Uint8Array; version: number; body: Uint8Array;
  editedAtMs: bigint } | null {
  try {
    const ev = fromBinary(ControlEventSchema, body);
    if (ev.event.case !== "edit") return null;
    const e = ev.event.value;
    return { messageId: e.messageId, version: e.version, body: e.body, editedAtMs: e.editedAtMs };
  } catch {
    return null; // a garbled notice must not wedge the cursor on it
  }
}

/** Whether a stored copy may take `incoming`: never an older version over a newer edit. */
export function olderThanStored(stored: StoredMessage, incoming: StoredMessage): boolean {
  return stored.state === MessageState.NORMAL && incoming.state === MessageState.NORMAL &&
    (stored.version ?? 0) > (incoming.version ?? 0);
}
