/**
 * Frozen numbers of protocol v1 that qim-js uses (docs/protocol.md; defined for the
 * server in qim.protocol). Error codes come from the generated common_pb ErrorCode.
 */

export const Op = {
  AUTH: 0x0101, AUTH_OK: 0x0102, PING: 0x0103, PONG: 0x0104, KICKED: 0x0105, ERROR: 0x0106,
  SEND_MESSAGE: 0x0201, SEND_ACK: 0x0202, RECALL_MESSAGE: 0x0203, RECALL_OK: 0x0204, EDIT_MESSAGE: 0x0205, EDIT_OK: 0x0206,
  PULL_MAILBOX: 0x0301, MAILBOX_BATCH: 0x0302, PUSH_EVENTS: 0x0303,
  PULL_SESSION_LIST: 0x0401, SESSION_LIST_BATCH: 0x0402, SESSION_DELTA: 0x0403, MARK_READ: 0x0404,
  MARK_READ_OK: 0x0405, READ_SYNC: 0x0406, PULL_PROFILES: 0x0407, PROFILES_BATCH: 0x0408,
  SET_CONVERSATION_STATE: 0x0409, CONVERSATION_STATE: 0x040a, CONVERSATION_STATE_SYNC: 0x040b, SET_RECEIPTS: 0x040c,
  RECEIPTS_OK: 0x040d, READ_RECEIPT: 0x040e, PULL_READERS: 0x040f, READERS_BATCH: 0x0410,
  PULL_HISTORY: 0x0501, HISTORY_BATCH: 0x0502,
  CREATE_GROUP: 0x0a01, PULL_MEMBERS: 0x0a02, MEMBERS_BATCH: 0x0a03, LEAVE_GROUP: 0x0a04, GROUP_OK: 0x0a05,
  SET_GROUP_TITLE: 0x0a06,
  JOIN_ROOM: 0x0601, ROOM_JOINED: 0x0602, ROOM_SEND: 0x0603, ROOM_ACK: 0x0604, ROOM_EVENTS: 0x0605,
  LEAVE_ROOM: 0x0606, ROOM_LEFT: 0x0607,
  REACT: 0x0b01, REACT_OK: 0x0b02, REACTION_EVENTS: 0x0b03, TYPING: 0x0b04, TYPING_OK: 0x0b05, TYPING_EVENTS: 0x0b06,
  REPORT: 0x0c01, REPORT_OK: 0x0c02,
} as const;

/** Requests the gateway's send-rate buckets charge (qim.protocol RATE_LIMITED_OPCODES). */
export const RATE_LIMITED_OPS = new Set<number>([Op.SEND_MESSAGE, Op.RECALL_MESSAGE, Op.EDIT_MESSAGE, Op.CREATE_GROUP,
  Op.LEAVE_GROUP, Op.MARK_READ, Op.SET_GROUP_TITLE, Op.JOIN_ROOM, Op.ROOM_SEND, Op.SET_CONVERSATION_STATE,
  Op.SET_RECEIPTS, Op.REACT]);

/** MailboxEntry.event_type. */
export const EventType = { MESSAGE: 1, RECALL: 2, MEMBERSHIP: 3, DELETE: 4, EDIT: 5 } as const;

/** MessageType raw values. */
export const MessageType = { UNKNOWN: 0, TEXT: 1, MEDIA: 2, CUSTOM: 3, CONTROL: 4 } as const;

/** MessageState raw values. */
export const MessageState = { NORMAL: 0, RECALLED: 1, DELETED: 2 } as const;

/** Kicked.Reason. */
export const KickReason = { REPLACED: 1, SERVER_SHUTDOWN: 2, TOKEN_EXPIRED: 3, REVOKED: 4 } as const;

/** Limits the server enforces (qim.consts); the SDK refuses before storing. */
export const MAX_MESSAGE_BODY = 1024 * 1024;
export const MAX_CUSTOM_TYPE_BYTES = 64;
export const HISTORY_PAGE_MAX_LIMIT = 200;
export const HISTORY_PAGE_MAX_BYTES = 512 * 1024;
export const MAILBOX_PAGE_MAX_ENTRIES = 256;
export const MAILBOX_PAGE_MAX_BYTES = 512 * 1024;
export const SESSION_PAGE_MAX_LIMIT = 200;
export const UNREAD_EXACT_WINDOW = 200n;
export const SESSION_HEAD_BODY_MAX = 4096;
export const PROFILES_MAX_IDS = 200;
