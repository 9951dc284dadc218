/**
 * Events qim-js tells the app (the same set as qim.sdk.events, docs/sdk.md "Events"),
 * always after the store committed. For one apply: conversations (entries already
 * counting the batch: replace, never add) before messagesAdded, then messagesUpdated,
 * messagesRemoved, pendingResolved, readPosition, membership.
 */

import type { Conversation, Membership, PendingSend, StoredMessage } from "./model";

/** connecting, syncing, ready, reconnecting, offline (stopped, with a reason), kicked (terminal). */
export type ConnState = "connecting" | "syncing" | "ready" | "reconnecting" | "offline" | "kicked";

/** A send's outcome as the server committed it. */
export interface SendAck {
  clientMessageId: Uint8Array;
  messageId: Uint8Array;
  conversationId: Uint8Array;
  conversationSeq: bigint;
  createdAtMs: bigint;
  /** True when learnt from the user's own mailbox entry rather than the SEND_ACK. */
  reconciled: boolean;
}

export type QimEvent =
  | { type: "state"; state: ConnState; reason: string }
  | { type: "conversations"; conversations: Conversation[] }
  | { type: "messagesAdded"; messages: StoredMessage[] }
  | { type: "messagesUpdated"; messages: StoredMessage[] }
  | { type: "messagesRemoved"; messageIds: Uint8Array[] }
  | { type: "sendPending"; pending: PendingSend }
  | { type: "pendingResolved"; acks: SendAck[] }
  | { type: "sendFailed"; clientMessageId: Uint8Array; code: number; message: string }
  | { type: "readPosition"; conversationId: Uint8Array; seq: bigint; source: "local" | "sync" | "server" }
  | { type: "membership"; change: Membership }
  | { type: "kicked"; reason: number }
  | { type: "syncFailed"; code: number; message: string }
  | { type: "cursorReset" };

export type Listener = (e: QimEvent) => void;
