/**
 * Events qim-js tells the app (the same set as qim.sdk.events, docs/sdk.md "Events"),
 * always after the store committed. For one apply: conversations (entries already
 * counting the batch: replace, never add) before messagesAdded, then messagesUpdated,
 * messagesRemoved, pendingResolved, readPosition, membership.
 */

import type { Conversation, ConversationState, Membership, PendingSend, StoredMessage } from "./model";

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
  /** True when the server's moderation committed `body` instead of the sent body (masked
   * words; docs/decisions/0126): the stored row has `body`. Absent/false otherwise. */
  replaced?: boolean;
  body?: Uint8Array;
}

/** One chatroom event as the app sees it, at (roomEpoch, roomSeq) (qim.sdk.room_events RoomMessage). */
export interface RoomMessage {
  roomId: bigint;
  roomEpoch: bigint;
  roomSeq: bigint;
  kind: "post" | "recall" | "joined" | "left" | "other";
  senderId: bigint;
  senderName: string;
  messageType: number;
  customType: Uint8Array;
  body: Uint8Array;
  createdAtMs: bigint;
  recalledSeq: bigint;
  recalled: boolean;
}

/** One emoji of a message's reactions, most first; `mine`: this user reacted with it (reactions.ts). */
export interface ReactionCount { emoji: string; count: number; mine: boolean }

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
  /** Pin, mute, hide or the list marks (mentioned, peerReadSeq) of a conversation changed (convstate.ts). */
  | { type: "conversationState"; state: ConversationState; source: "local" | "sync" | "server" }
  /** A read tick: the peer of a direct chat read up to `seq` (only while both have receipts on). */
  | { type: "peerRead"; conversationId: Uint8Array; readerUserId: bigint; seq: bigint }
  /** A member's reaction on a message changed (reactions.ts): the whole summary after it and
   * its version; told only when newer than the summary held (events arrive out of order). */
  | { type: "reactions"; conversationId: Uint8Array; messageId: Uint8Array; userId: bigint; emoji: string;
      removed: boolean; summary: ReactionCount[]; version: bigint }
  /** A member started or stopped typing (told, or expired without renewal; reactions.ts). */
  | { type: "typing"; conversationId: Uint8Array; userId: bigint; typing: boolean }
  /** The user's badge (total unread, UserBadgeState) changed; `version` only grows (sessions.ts). */
  | { type: "badge"; badge: bigint; version: bigint }
  | { type: "kicked"; reason: number; message?: string; untilMs?: number } // BANNED: the reason and the end
  | { type: "syncFailed"; code: number; message: string }
  | { type: "cursorReset" }
  /** The browser's storage: "full" (writes refused: new messages are not stored and a send
   * is refused with StorageTrouble; retried by itself), "lost" (the database was deleted
   * under the page: re-opened empty and synced again from the server, or, when that
   * fails too, the app should offer a reload), "ok" (writes work again, catching up). */
  | { type: "storage"; state: "ok" | "full" | "lost"; message: string }
  /** New events of a joined room, each once, in roomSeq order; `truncated`: the replay
   * after a (re-)join could not reach back to the last position (show that earlier
   * messages are missing; `firstSeq` is the oldest the server still had). */
  | { type: "roomEvents"; roomId: bigint; events: RoomMessage[]; truncated: boolean; firstSeq: bigint; memberCount: number }
  | { type: "roomState"; roomId: bigint; state: "joining" | "joined" | "rejoining" | "left"; reason: string };

export type Listener = (e: QimEvent) => void;
