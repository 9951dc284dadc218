/**
 * What qim-js stores and tells (the shapes of qim.sdk.model). Ids are 16-byte
 * Uint8Arrays (conversation, message, client_message_id) or bigint (user, group,
 * device, tenant); sequences are bigint; times are unix milliseconds (bigint from the
 * wire, safe as Number for display).
 */

/** Options of a send (decision 0120): the replied message_id, mentioned user ids, everyone. */
export interface SendExtras {
  replyTo?: Uint8Array;
  mentions?: bigint[];
  mentionAll?: boolean;
}

/** The replied message as the server quoted it when the reply was written (extras.ts). */
export interface ReplyInfo {
  messageId: Uint8Array;
  conversationSeq: bigint;
  senderId: bigint;
  messageType: number;
  state: number;
  preview: string;
}

/** One stored message; recalled (1) or deleted (2) ones have an empty body. */
export interface StoredMessage {
  messageId: Uint8Array;
  conversationId: Uint8Array;
  conversationSeq: bigint;
  senderId: bigint;
  createdAtMs: bigint;
  messageType: number;
  customType: Uint8Array;
  body: Uint8Array;
  clientMessageId: Uint8Array | null;
  mailboxSeq: bigint;
  state: number;
  /** Replies, mentions, edits (extras.ts; absent on rows stored by an older qim-js). */
  reply?: ReplyInfo | null;
  mentions?: bigint[];
  mentionAll?: boolean;
  /** 0: never edited; n: the body is the sender's n-th edit. */
  version?: number;
  editedAtMs?: bigint;
}

/** pending → acked (SEND_ACK) / committed (own mailbox entry) / failed (permanent ERROR). */
export type PendingState = "pending" | "acked" | "committed" | "failed";

/** A send kept in the store from before it leaves until the server has it. */
export interface PendingSend {
  clientMessageId: Uint8Array;
  ordinal: bigint;
  conversationId: Uint8Array;
  recipientUserId: bigint;
  messageType: number;
  customType: Uint8Array;
  body: Uint8Array;
  createdLocalMs: number;
  state: PendingState;
  messageId: Uint8Array | null;
  conversationSeq: bigint;
  failure: string;
  /** Reply target and mentions: part of the send, the same on every retransmission. */
  extras?: SendExtras;
}

/** A send's commit coordinates. */
export interface Resolved {
  clientMessageId: Uint8Array;
  messageId: Uint8Array;
  conversationId: Uint8Array;
  conversationSeq: bigint;
  createdAtMs: bigint;
  /** The committed body when moderation replaced the sent one (SEND_ACK replaced; decision 0126). */
  body?: Uint8Array;
}

/** The newest visible message of a conversation (body cut at 4 KiB: bodyComplete false). */
export interface LastMessage {
  messageId: Uint8Array;
  conversationSeq: bigint;
  senderId: bigint;
  createdAtMs: bigint;
  messageType: number;
  body: Uint8Array;
  bodyComplete: boolean;
  state: number;
}

/** One entry of the conversation list (values after the change). */
export interface Conversation {
  conversationId: Uint8Array;
  kind: number;
  peerUserId: bigint;
  groupId: bigint;
  title: string;
  readConversationSeq: bigint;
  unread: number;
  unreadExact: boolean;
  lastMessage: LastMessage | null;
  joinedAt: bigint;
  leftAt: bigint;
}

/** A group membership CONTROL message as applied. */
export interface Membership {
  conversationId: Uint8Array;
  groupId: bigint;
  conversationSeq: bigint;
  kind: number;
  users: bigint[];
  actorUserId: bigint;
}

/** What one store transaction changed (told to the app only after it committed). */
export interface ApplyResult {
  inserted: StoredMessage[];
  updated: StoredMessage[];
  resolved: Resolved[];
  removed: Uint8Array[];
  conversations: Conversation[];
  reads: [Uint8Array, bigint][];
  membership: Membership[];
}

/** An empty ApplyResult. */
export function emptyResult(): ApplyResult {
  return { inserted: [], updated: [], resolved: [], removed: [], conversations: [], reads: [], membership: [] };
}

/** The user's choices for one conversation and what the list marks (qim.sdk ConversationState; convstate.ts). */
export interface ConversationState {
  conversationId: Uint8Array;
  pinned: boolean;
  /** ms since the epoch; 0 not muted; MUTE_FOREVER for ever. */
  mutedUntil: bigint;
  hidden: boolean;
  /** The newest conversation_seq when hidden: a newer message shows it again. */
  hiddenUpto: bigint;
  /** An unread message mentions the user. */
  mentioned: boolean;
  /** Direct: the peer's read position (0 when receipts are off on either side). */
  peerReadSeq: bigint;
  /** The server's version of pinned, mutedUntil and hidden: grows with every change; an
   * older state arriving late is not applied (docs/decisions/0157). 0 unknown. */
  version: bigint;
}
