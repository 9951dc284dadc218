/**
 * Client: what a web app holds (the counterpart of qim.sdk.Client; docs/sdk.md "qim-js").
 * One user on one device at one gateway endpoint or several (ws:// in development, wss://), over
 * a Runtime and the device's IndexedDB LocalStore. Identity comes from the token's
 * claims (`sub` user, `dev` device, `tenant` hex32, optional `name`); only the gateway
 * checks the signature. Errors: SendRefused (nothing stored), ServerError, NotConnected,
 * Kicked, StoreError.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ErrorCode } from "../gen/qim/v1/common_pb";
import { CreateGroupSchema, GroupOkSchema, LeaveGroupSchema, MembersBatchSchema, PullMembersSchema,
  SetGroupTitleSchema, type Member } from "../gen/qim/v1/group_pb";
import { ProfilesBatchSchema, PullProfilesSchema } from "../gen/qim/v1/session_pb";
import { HistoryBatchSchema, HistoryDirection, PullHistorySchema } from "../gen/qim/v1/history_pb";
import { EditMessageSchema, EditOkSchema, RecallMessageSchema, RecallOkSchema, type EditOk } from "../gen/qim/v1/message_pb";
import { beBytes, concat, toHex, utf8 } from "./bytes";
import { tokenClaims, U63_MAX, type TokenClaims } from "./claims";
import { ConnectionLost, NotConnected, retryable, SendRefused, ServerError } from "./errors";
import type { Listener, SendAck } from "./events";
import { parseEndpoints } from "./gateways";
import { conversationIdDirect, conversationKind, KIND_DIRECT, KIND_GROUP } from "./ids";
import type { Conversation, PendingSend, SendExtras, StoredMessage } from "./model";
import { MAX_CUSTOM_TYPE_BYTES, MessageType, Op, PROFILES_MAX_IDS } from "./protocol";
import { Backoff, withRetry } from "./retry";
import { ConvStates } from "./convstate";
import { Reactions } from "./reactions";
import { Push } from "./push";
import { report, type Reported, type ReportReasonName } from "./reports";
import { checkExtras } from "./extras";
import { Rooms } from "./rooms";
import { Runtime, type RuntimeOptions } from "./runtime";
import { Sessions } from "./sessions";
import { LocalStore } from "./store";
import { decodeRef, fetchMedia, type MediaHttp } from "./media";
import { resumeMediaSends, sendMediaOnce, type MediaOpts } from "./mediasend";
import { markState, noteGroup, oldestReached, openConversation, setOldestReached } from "./storeops";

export { tokenClaims, type TokenClaims } from "./claims";

export interface ClientOptions extends RuntimeOptions {
  /** An IndexedDB factory (fake-indexeddb in unit tests); the browser's by default. */
  idbFactory?: IDBFactory;
  /**
   * The name the store is kept under, whichever gateway is in use (decision 0082);
   * default: the first endpoint.
   */
  deployment?: string;
}

/** The app-facing client of one device. */
export class Client {
  readonly sessions: Sessions;
  /** Chatrooms, in memory only (rooms.ts; docs/sdk.md "Chatrooms"). */
  readonly rooms: Rooms;
  /** Pin, mute, hide, read receipts (convstate.ts; docs/sdk.md "Pin, mute, hide"). */
  readonly convstates: ConvStates;
  /** Reactions and typing, in memory only (reactions.ts; docs/sdk.md "Reactions and typing"). */
  readonly reactions: Reactions;
  /** Device push registrations (push.ts; docs/sdk.md "Push registrations"). */
  readonly push: Push;
  private names = new Map<bigint, string>(); // display names learnt by PULL_PROFILES ("" = none given)

  private constructor(readonly runtime: Runtime, readonly store: LocalStore, readonly claims: TokenClaims) {
    this.sessions = new Sessions(runtime);
    this.rooms = new Rooms(runtime);
    this.convstates = new ConvStates(runtime);
    this.push = new Push(runtime);
    this.reactions = new Reactions(runtime, claims.userId,
      async (conv) => (await store.conversation(conv))?.peerUserId ?? 0n);
    this.sessions.note = (entries) => this.convstates.noteEntries(entries);
  }

  /**
   * Open the device's store (identity from the token; named after `opts.deployment`,
   * else the first endpoint) and a runtime for `endpoint` — one WebSocket URL or several,
   * the next on failure (gateways.ts); connect() next.
   */
  static async open(endpoint: string | readonly string[], token: string, opts: ClientOptions = {}): Promise<Client> {
    const claims = tokenClaims(token);
    const scope = opts.deployment || parseEndpoints(endpoint)[0];
    const store = await LocalStore.open(scope, claims.tenant, claims.userId, claims.deviceId, opts.idbFactory);
    return new Client(new Runtime(endpoint, token, store, opts), store, claims);
  }

  /**
   * Report a message of a conversation this user is a member of to the operator
   * (reports.ts; docs/sdk.md "Reports"); pass the returned clientReportId to retry.
   */
  async report(conv: Uint8Array, messageId: Uint8Array, reason: ReportReasonName, text = "",
               clientReportId?: Uint8Array): Promise<Reported> {
    const peer = (await this.store.conversation(conv))?.peerUserId ?? 0n;
    return report(this.runtime, conv, messageId, peer, reason, text, clientReportId);
  }

  get userId(): bigint {
    return this.claims.userId;
  }

  get deviceId(): bigint {
    return this.claims.deviceId;
  }

  get state() {
    return this.runtime.state;
  }

  /** The user's total unread (UserBadgeState) and its version; the "badge" event tells changes. */
  get badge(): { badge: bigint; version: bigint } {
    return this.sessions.badge;
  }

  /** Listen to every event (events.ts); returns the unsubscribe function. */
  on(fn: Listener): () => void {
    return this.runtime.on(fn);
  }

  /** Connect (see Runtime.connect; `keepTrying`: reconnect in the background after a failure). */
  connect(keepTrying = false): Promise<void> {
    return this.runtime.connect(keepTrying);
  }

  /** Stop; the store stays open for reads and a later connect(). */
  close(): void {
    this.runtime.close();
  }

  /** The list: pinned first, newest activity first in each part, hidden ones left out (convstate.ts). */
  async conversations(): Promise<Conversation[]> {
    return this.convstates.shape(await this.store.conversations());
  }

  /** One entry of the list, or null. */
  conversation(conv: Uint8Array): Promise<Conversation | null> {
    return this.store.conversation(conv);
  }

  /** The direct conversation id of this user and `peer`. */
  directId(peer: bigint): Uint8Array {
    return conversationIdDirect(this.claims.tenant, this.userId, peer);
  }

  /** The direct conversation with `peer`, listed from now on. */
  async openDirect(peer: bigint): Promise<Conversation> {
    if (peer <= 0n || peer > U63_MAX || peer === this.userId) throw new RangeError("peer must be another user's id");
    const conv = this.directId(peer);
    this.runtime.tell(await openConversation(this.store, conv, peer, 0n));
    return (await this.conversation(conv))!;
  }

  /**
   * Up to `limit` messages with seq < beforeSeq (0: newest) in seq order: the store's,
   * and when it has fewer, older history pages (PULL_HISTORY OLDER) stored and returned
   * too. Offline, what the store has.
   */
  async messages(conv: Uint8Array, beforeSeq = 0n, limit = 50): Promise<StoredMessage[]> {
    let page = await this.store.messages(conv, beforeSeq, limit);
    if (page.length >= limit || (await oldestReached(this.store, conv))) return page;
    const entry = await this.conversation(conv);
    let anchor = page.length ? page[0].conversationSeq : beforeSeq;
    try {
      while (page.length < limit) {
        const req = toBinary(PullHistorySchema, create(PullHistorySchema, { conversationId: conv,
          peerUserId: entry?.peerUserId ?? 0n, anchorSeq: anchor, direction: HistoryDirection.OLDER, limit }));
        const rt = this.runtime;
        const batch = fromBinary(HistoryBatchSchema, (await withRetry(() => rt.request(Op.PULL_HISTORY, req),
          new Backoff(50, 2000, rt.retryBudgetMs))).body);
        if (batch.items.length) rt.tell({ ...(await this.store.applyHistory(conv, batch.items)), inserted: [] });
        if (!batch.hasMore || !batch.items.length) {
          await setOldestReached(this.store, conv);
          break;
        }
        anchor = batch.nextAnchor;
        page = await this.store.messages(conv, beforeSeq, limit);
      }
    } catch (e) {
      if (!(e instanceof NotConnected || e instanceof ConnectionLost)) throw e; // offline: the store's part only
    }
    return this.store.messages(conv, beforeSeq, limit);
  }

  /** Sends not in the store as messages yet: pending, acked (mailbox entry not applied) or failed. */
  unsent(conv?: Uint8Array): Promise<PendingSend[]> {
    return this.store.pendingSends(["pending", "acked", "failed"], conv);
  }

  /**
   * Send: stored as pending first (sendPending), then sent. Returns the SendAck, or
   * with `wait` false the client_message_id at once (the outcome comes as events).
   * `extras`: a reply (`replyTo`, quoted by the server) and mentions (decision 0120).
   * SendRefused for what the server would refuse (nothing stored).
   */
  async send(conv: Uint8Array, body: Uint8Array, messageType: number = MessageType.TEXT,
    customType = new Uint8Array(0), wait = true, extras?: SendExtras): Promise<SendAck | Uint8Array> {
    const rt = this.runtime;
    const bad = extras ? checkExtras(extras) : null;
    if (bad) throw new SendRefused(bad);
    const recipient = await this.check(conv, body, messageType, customType);
    const row = await this.store.addPending(conv, recipient, messageType, customType, body, extras);
    const ack = wait ? rt.waitAck(row.clientMessageId) : null;
    ack?.catch(() => undefined); // told to the caller below; never an unhandled rejection meanwhile
    rt.emit({ type: "sendPending", pending: row });
    rt.sender.track(row);
    if (rt.connected && rt.conn) rt.sender.start(rt.conn, row);
    return ack ?? row.clientMessageId;
  }

  /** The MediaService's base URL (https://host:port), set by the app before sendMedia/download (media.ts). */
  mediaUrl = "";
  /** How media.ts talks HTTP (a fake fetch in unit tests). */
  mediaHttp: MediaHttp = {};

  /** Upload `file` with the device's token (in presigned parts above LARGE_BYTES unless an
   * image: mediaparts.ts) and send its reference as a MEDIA message (docs/sdk.md "Media");
   * returns what send returns. MediaRefused, then send's errors. */
  async sendMedia(conv: Uint8Array, file: Blob | Uint8Array, opts: MediaOpts = {},
    wait = true): Promise<SendAck | Uint8Array> {
    if (!this.mediaUrl) throw new RangeError("set client.mediaUrl to the MediaService's address first");
    const name = opts.name ?? (typeof File !== "undefined" && file instanceof File ? file.name : "");
    return sendMediaOnce(this, conv, file, { ...opts, name }, wait); // recorded until pending (mediasend.ts)
  }

  /** Finish the media sends a reload or a closed page cut (call once mediaUrl is set):
   * [file name, the send's cmid or the error that ended it] each (mediasend.ts). */
  async resumeMedia(): Promise<[string, Uint8Array | Error][]> {
    if (!this.mediaUrl) throw new RangeError("set client.mediaUrl to the MediaService's address first");
    return resumeMediaSends(this);
  }

  /** The original of a MEDIA message as a Blob, checked against its SHA-256. MediaRefused. */
  async download(message: StoredMessage): Promise<Blob> {
    if (message.messageType !== MessageType.MEDIA) throw new RangeError("not a MEDIA message");
    if (!this.mediaUrl) throw new RangeError("set client.mediaUrl to the MediaService's address first");
    const peer = (await this.conversation(message.conversationId))?.peerUserId ?? 0n;
    return fetchMedia(this.mediaUrl, await this.runtime.currentToken(), decodeRef(message.body),
      message.conversationId, message.messageId, peer, this.mediaHttp);
  }

  /** A TEXT message of UTF-8 `text` (any script, emoji, several lines), a reply or mention with `extras`. */
  sendText(conv: Uint8Array, text: string, wait = true, extras?: SendExtras): Promise<SendAck | Uint8Array> {
    return this.send(conv, utf8(text), MessageType.TEXT, new Uint8Array(0), wait, extras);
  }

  private async check(conv: Uint8Array, body: Uint8Array, type: number, custom: Uint8Array): Promise<bigint> {
    const max = this.runtime.maxBodyBytes;
    if (body.length > max) throw new SendRefused(`body of ${body.length} bytes exceeds ${max}`);
    if (custom.length > MAX_CUSTOM_TYPE_BYTES) throw new SendRefused(`custom_type exceeds ${MAX_CUSTOM_TYPE_BYTES} bytes`);
    if (type === MessageType.CONTROL) throw new SendRefused("CONTROL messages are generated by the server");
    let kind: number;
    try {
      kind = conversationKind(conv);
    } catch {
      throw new SendRefused("conversation_id must be 16 non-zero bytes of a known kind");
    }
    // the server's rule (qim/wire/validate.py blank_text): a row with nothing in it is never meant
    if (type === MessageType.TEXT && !new TextDecoder().decode(body).trim()) {
      throw new SendRefused("a text message must not be empty or only white space");
    }
    if (kind === KIND_GROUP) return 0n;
    if (kind !== KIND_DIRECT) throw new SendRefused("rooms are not sent with SEND_MESSAGE");
    const peer = (await this.conversation(conv))?.peerUserId ?? 0n;
    if (!peer || toHex(this.directId(peer)) !== toHex(conv)) throw new SendRefused("unknown peer: openDirect(peer) first");
    return peer;
  }

  private async operation<T>(kind: string, key: Uint8Array, replay: boolean, opcode: number,
    build: (cmid: Uint8Array) => Uint8Array): Promise<Uint8Array> {
    const k = toHex(key);
    const [cmid, stored] = await this.store.opBegin(kind, k, replay);
    if (stored) return stored;
    const body = build(cmid);
    try {
      const rt = this.runtime;
      const reply = await withRetry(() => rt.request(opcode, body), new Backoff(50, 2000, rt.retryBudgetMs));
      await this.store.opEnd(kind, k, cmid, reply.body);
      return reply.body;
    } catch (e) {
      if (e instanceof ServerError && !retryable(e)) await this.store.opEnd(kind, k, cmid, null);
      throw e;
    }
  }

  /**
   * Edit one of our own messages (within the recall window): every device, this one too,
   * gets messagesUpdated with the new body and version when the edit's notice arrives.
   * ServerError FORBIDDEN (not ours, too old, recalled), NOT_FOUND, POLICY_REFUSED. The
   * EditOk's `replaced` is true when moderation committed its `body` instead (decision 0126).
   */
  async edit(conv: Uint8Array, messageId: Uint8Array, text: string): Promise<EditOk> {
    const peer = (await this.conversation(conv))?.peerUserId ?? 0n;
    const body = utf8(text);
    // one key per (message, body) while unanswered (a retry keeps its cmid); a new edit after the answer
    const key = concat(concat(conv, messageId), new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(body))));
    const reply = await this.operation("edit", key, false, Op.EDIT_MESSAGE,
      (cmid) => toBinary(EditMessageSchema, create(EditMessageSchema, { conversationId: conv, messageId,
        clientMessageId: cmid, peerUserId: peer, body })));
    return fromBinary(EditOkSchema, reply);
  }

  /** Recall one of our own messages; our copy loses its text at once, others' with the notice. */
  async recall(conv: Uint8Array, messageId: Uint8Array) {
    const peer = (await this.conversation(conv))?.peerUserId ?? 0n;
    const reply = await this.operation("recall", concat(conv, messageId), true, Op.RECALL_MESSAGE,
      (cmid) => toBinary(RecallMessageSchema, create(RecallMessageSchema, { conversationId: conv, messageId,
        clientMessageId: cmid, peerUserId: peer })));
    const ok = fromBinary(RecallOkSchema, reply);
    this.runtime.tell(await markState(this.store, messageId, ok.state));
    return ok;
  }

  /** Move the read position (default: the newest message); other devices and tabs get READ_SYNC. */
  markRead(conv: Uint8Array, seq?: bigint): Promise<bigint> {
    return this.sessions.markRead(conv, seq);
  }

  /** Create a group (a random id unless given) with this user as owner; its list entry. */
  async createGroup(members: bigint[], groupId?: bigint, title = ""): Promise<Conversation> {
    const gid = groupId ?? (BigInt.asUintN(62, BigInt("0x" + toHex(crypto.getRandomValues(new Uint8Array(8))))) + 1n);
    const wanted = [...new Set(members.filter((m) => m !== this.userId))].sort((a, b) => (a < b ? -1 : 1));
    const reply = await this.operation("create_group", concat(beBytes(gid, 8), ...wanted.map((m) => beBytes(m, 8))),
      true, Op.CREATE_GROUP, (cmid) => toBinary(CreateGroupSchema, create(CreateGroupSchema,
        { groupId: gid, members: wanted, clientMessageId: cmid, title })));
    this.runtime.tell(await noteGroup(this.store, reply, gid, true, title));
    return (await this.conversation(fromBinary(GroupOkSchema, reply).conversationId))!;
  }

  /** Rename a group (its owner only; "" removes the title); members learn it by a CONTROL notice. */
  async setGroupTitle(groupId: bigint, title: string): Promise<Conversation> {
    const reply = await this.operation("set_group_title", concat(beBytes(groupId, 8), utf8(title)), false,
      Op.SET_GROUP_TITLE, (cmid) => toBinary(SetGroupTitleSchema, create(SetGroupTitleSchema,
        { groupId, title, clientMessageId: cmid })));
    this.runtime.tell(await noteGroup(this.store, reply, groupId, true, title, true));
    return (await this.conversation(fromBinary(GroupOkSchema, reply).conversationId))!;
  }

  /**
   * Display names of users (PULL_PROFILES, 200 ids a request; docs/protocol.md "Names"):
   * user id → name, "" when the user gave none. Names are learnt once per client;
   * ids stay the keys. The token's own `name` is this user's.
   */
  async displayNames(users: bigint[]): Promise<Map<bigint, string>> {
    if (this.claims.name) this.names.set(this.userId, this.claims.name);
    const missing = [...new Set(users)].filter((u) => !this.names.has(u) && u > 0n && u <= U63_MAX);
    for (let i = 0; i < missing.length; i += PROFILES_MAX_IDS) {
      const req = toBinary(PullProfilesSchema, create(PullProfilesSchema, { userIds: missing.slice(i, i + PROFILES_MAX_IDS) }));
      const rt = this.runtime;
      const b = fromBinary(ProfilesBatchSchema, (await withRetry(() => rt.request(Op.PULL_PROFILES, req),
        new Backoff(50, 2000, rt.retryBudgetMs))).body);
      for (const p of b.profiles) this.names.set(p.userId, p.displayName);
    }
    return new Map(users.filter((u) => this.names.has(u)).map((u) => [u, this.names.get(u)!]));
  }

  /** Leave a group; it stays listed with leftAt. */
  async leaveGroup(groupId: bigint): Promise<Conversation> {
    const reply = await this.operation("leave_group", beBytes(groupId, 8), false, Op.LEAVE_GROUP,
      (cmid) => toBinary(LeaveGroupSchema, create(LeaveGroupSchema, { groupId, clientMessageId: cmid })));
    this.runtime.tell(await noteGroup(this.store, reply, groupId, false));
    return (await this.conversation(fromBinary(GroupOkSchema, reply).conversationId))!;
  }

  /** Join a chatroom; its events arrive as "roomEvents" (the newest `recent` first), joined
   * again by itself after a reconnect, a gap or a lost RoomWriter (`truncated` when the
   * replay could not be complete). ServerError, NotConnected. */
  joinRoom(roomId: bigint, recent = 0) {
    return this.rooms.join(roomId, recent);
  }

  /** Leave a chatroom; the member count after it. */
  leaveRoom(roomId: bigint): Promise<number> {
    return this.rooms.leave(roomId);
  }

  /** Post text (or bytes) to a joined chatroom; retried with one client_message_id until the
   * send timeout. ServerError FORBIDDEN when not joined, SendRefused. */
  sendRoom(roomId: bigint, body: string | Uint8Array) {
    return this.rooms.send(roomId, typeof body === "string" ? utf8(body) : body);
  }

  /** Current members by user id (FORBIDDEN for a non-member). */
  async members(groupId: bigint): Promise<Member[]> {
    const out: Member[] = [];
    let after = 0n;
    for (;;) {
      const req = toBinary(PullMembersSchema, create(PullMembersSchema, { groupId, afterUserId: after, limit: 1000 }));
      const rt = this.runtime;
      const b = fromBinary(MembersBatchSchema, (await withRetry(() => rt.request(Op.PULL_MEMBERS, req),
        new Backoff(50, 2000, rt.retryBudgetMs))).body);
      out.push(...b.members);
      if (!b.hasMore || !b.members.length) return out;
      after = b.members[b.members.length - 1].userId;
    }
  }
}

export { ErrorCode };
