/**
 * Telling the app one committed apply (the counterpart of qim.sdk.tell), in the order of
 * docs/sdk.md "Events": conversations (entries already counting the batch) before
 * messagesAdded, then messagesUpdated, messagesRemoved, pendingResolved (settling the
 * sends our own mailbox entries resolved), readPosition, membership.
 */

import type { ReadSource, RuntimeStats } from "./core";
import type { QimEvent, SendAck } from "./events";
import type { ApplyResult } from "./model";

/** What telling needs of the runtime. */
export interface TellHost {
  emit(e: QimEvent): void;
  settle(cmid: Uint8Array, ack: SendAck | null, err?: Error): boolean;
  readonly sender: { resolved(cmid: Uint8Array): void };
  readonly stats: RuntimeStats;
}

/** Tell `r` (after the store committed it) and settle the sends it resolved. */
export function tellApply(rt: TellHost, r: ApplyResult, readSource: ReadSource = "local"): void {
  if (r.conversations.length) rt.emit({ type: "conversations", conversations: r.conversations });
  if (r.inserted.length) rt.emit({ type: "messagesAdded", messages: r.inserted });
  if (r.updated.length) rt.emit({ type: "messagesUpdated", messages: r.updated });
  if (r.removed.length) rt.emit({ type: "messagesRemoved", messageIds: r.removed });
  if (r.resolved.length) {
    const acks = r.resolved.map((x) => ({ ...x, reconciled: true }));
    for (const a of acks) {
      rt.sender.resolved(a.clientMessageId);
      if (rt.settle(a.clientMessageId, a)) rt.stats.reconciled++;
    }
    rt.emit({ type: "pendingResolved", acks });
  }
  for (const [conversationId, seq] of r.reads) rt.emit({ type: "readPosition", conversationId, seq, source: readSource });
  for (const change of r.membership) rt.emit({ type: "membership", change });
}
