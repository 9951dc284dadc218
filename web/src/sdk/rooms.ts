/**
 * Chatrooms in qim-js (the counterpart of qim.sdk.rooms; docs/sdk.md "Chatrooms",
 * docs/protocol.md "Rooms"): join, leave, post, and the events of every joined room
 * told once, in room_seq order. State is in memory only (no IndexedDB, no unread).
 * - a join answers with a replay ending at RoomJoined.roomSeq; live frames that came
 *   during the join are merged after it (those of the joined epoch above that seq);
 * - a live event at last + 1 is told, one at or below is dropped, one above (a gap), one
 *   of another epoch, or a `rejoin` notice makes the SDK join again from its last
 *   position, and so does every reconnect (after the mailbox sync); a replay the
 *   server could not complete is told with `truncated` and its first seq: never a
 *   silent gap;
 * - posts get a random client_message_id and are retried with it on UNAVAILABLE,
 *   RATE_LIMITED and a lost connection until the send timeout (a retry is one post); a
 *   post seen again in a new epoch (retried across a RoomWriter loss) is told once.
 * Errors: ServerError (FORBIDDEN when not joined, INVALID_ARGUMENT, …), SendRefused,
 * NotConnected, ConnectionLost.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ErrorCode, type MessageType as MessageTypeEnum } from "../gen/qim/v1/common_pb";
import {
  JoinRoomSchema, LeaveRoomSchema, type RoomEvent, RoomEvent_Kind, RoomAckSchema, type RoomEvents,
  RoomJoinedSchema, RoomLeftSchema, RoomPositionSchema, RoomSendSchema, type RoomJoined,
} from "../gen/qim/v1/room_pb";
import { toHex } from "./bytes";
import type { Connection } from "./connection";
import { ConnectionLost, NotConnected, retryable, SendRefused, ServerError } from "./errors";
import type { QimEvent, RoomMessage } from "./events";
import { MAX_CUSTOM_TYPE_BYTES, MessageType, Op } from "./protocol";
import { Backoff, sleep } from "./retry";

/** Posts of each room remembered to tell a re-posted one once (qim/consts.py ROOM_DEDUP_ENTRIES). */
const TOLD_KEPT = 4096;
const U63 = (1n << 63n) - 1n;
const KINDS: Record<number, RoomMessage["kind"]> = {
  [RoomEvent_Kind.POST]: "post", [RoomEvent_Kind.RECALL]: "recall",
  [RoomEvent_Kind.JOINED]: "joined", [RoomEvent_Kind.LEFT]: "left",
};

/** What rooms need of the runtime (qim-js Runtime). */
export interface RoomHost {
  request(opcode: number, body: Uint8Array): Promise<{ opcode: number; body: Uint8Array }>;
  emit(e: QimEvent): void;
  afterSync: ((c: Connection) => Promise<void>)[];
  onRoomEvents: (f: RoomEvents) => void;
  maxBodyBytes: number;
  sendTimeoutMs: number;
  retryBudgetMs: number;
}

interface Room {
  roomId: bigint;
  recent: number;
  epoch: bigint;
  seq: bigint;
  memberCount: number;
  joining: Promise<RoomJoined> | null;
  again: boolean;
  buffered: RoomEvents[];
  told: Set<string>;
}

function checkRoomId(roomId: bigint): void {
  if (roomId <= 0n || roomId > U63) throw new ServerError(ErrorCode.INVALID_ARGUMENT, `room_id ${roomId} must be 1..2^63-1`);
}

/** The rooms of one runtime. */
export class Rooms {
  private rooms = new Map<bigint, Room>();

  constructor(private readonly rt: RoomHost) {
    rt.afterSync.push(async () => {
      for (const room of this.rooms.values()) this.rejoin(room);
    });
    rt.onRoomEvents = (f) => this.onFrame(f);
  }

  /** Join `roomId` (the newest `recent` events told first); the RoomJoined of the join. */
  async join(roomId: bigint, recent = 0): Promise<RoomJoined> {
    checkRoomId(roomId);
    let room = this.rooms.get(roomId);
    if (!room) {
      room = { roomId, recent, epoch: 0n, seq: 0n, memberCount: 0, joining: null, again: false, buffered: [], told: new Set() };
      this.rooms.set(roomId, room);
    }
    return this.joinRoom(room);
  }

  /** Leave `roomId` (its state is forgotten); the member count after it. */
  async leave(roomId: bigint): Promise<number> {
    checkRoomId(roomId);
    if (this.rooms.delete(roomId)) this.rt.emit({ type: "roomState", roomId, state: "left", reason: "left by the app" });
    try {
      const reply = await this.rt.request(Op.LEAVE_ROOM, toBinary(LeaveRoomSchema, create(LeaveRoomSchema, { roomId })));
      return Number(fromBinary(RoomLeftSchema, reply.body).memberCount);
    } catch (e) {
      if (e instanceof ConnectionLost || e instanceof NotConnected) return 0; // a lost connection left every room
      throw e;
    }
  }

  /** Post to a joined room; its position once the RoomWriter gave it one. */
  async send(roomId: bigint, body: Uint8Array, messageType: number = MessageType.TEXT,
    customType: Uint8Array = new Uint8Array()): Promise<{ roomEpoch: bigint; roomSeq: bigint }> {
    checkRoomId(roomId);
    if (body.length > this.rt.maxBodyBytes) throw new SendRefused(`body of ${body.length} bytes is over ${this.rt.maxBodyBytes}`);
    if (customType.length > MAX_CUSTOM_TYPE_BYTES) throw new SendRefused(`custom_type over ${MAX_CUSTOM_TYPE_BYTES} bytes`);
    const cmid = crypto.getRandomValues(new Uint8Array(16));
    const req = toBinary(RoomSendSchema, create(RoomSendSchema, { roomId, clientMessageId: cmid, messageType: messageType as MessageTypeEnum, customType, body }));
    const deadline = Date.now() + this.rt.sendTimeoutMs;
    const backoff = new Backoff(undefined, undefined, null);
    for (;;) {
      const room = this.rooms.get(roomId);
      if (!room) throw new ServerError(ErrorCode.FORBIDDEN, "join the room before posting to it");
      if (room.joining) await room.joining.catch(() => undefined);
      try {
        const ack = fromBinary(RoomAckSchema, (await this.rt.request(Op.ROOM_SEND, req)).body);
        return { roomEpoch: ack.roomEpoch, roomSeq: ack.roomSeq };
      } catch (e) {
        const transient = e instanceof ConnectionLost || e instanceof NotConnected || retryable(e);
        if (!transient || Date.now() > deadline) throw e;
        await backoff.wait(e); // the same client_message_id: a retry is one post
      }
    }
  }

  /** The rooms this client is in. */
  get joined(): bigint[] {
    return [...this.rooms.keys()];
  }

  private joinRoom(room: Room): Promise<RoomJoined> {
    if (room.joining) {
      room.again = true;
      return room.joining;
    }
    this.rt.emit({ type: "roomState", roomId: room.roomId, state: room.epoch ? "rejoining" : "joining", reason: "" });
    const run = this.runJoin(room).finally(() => { room.joining = null; });
    room.joining = run;
    return run;
  }

  private async runJoin(room: Room): Promise<RoomJoined> {
    const backoff = new Backoff(undefined, undefined, this.rt.retryBudgetMs);
    for (;;) {
      room.again = false;
      const req = create(JoinRoomSchema, { roomId: room.roomId, recent: room.epoch ? 0 : room.recent });
      if (room.epoch) req.since = create(RoomPositionSchema, { roomEpoch: room.epoch, roomSeq: room.seq });
      let reply: RoomJoined;
      try {
        reply = fromBinary(RoomJoinedSchema, (await this.rt.request(Op.JOIN_ROOM, toBinary(JoinRoomSchema, req))).body);
      } catch (e) {
        if (retryable(e)) { await backoff.wait(e); continue; }
        room.buffered = [];
        if (this.rooms.get(room.roomId) === room && !(e instanceof ConnectionLost || e instanceof NotConnected)) {
          this.rooms.delete(room.roomId); // refused for good: not a member any more
          this.rt.emit({ type: "roomState", roomId: room.roomId, state: "left", reason: String(e) });
        }
        throw e;
      }
      this.joined_(room, reply);
      if (!room.again) {
        this.rt.emit({ type: "roomState", roomId: room.roomId, state: "joined", reason: "" });
        return reply;
      }
      await sleep(0);
    }
  }

  private joined_(room: Room, reply: RoomJoined): void {
    room.epoch = reply.roomEpoch;
    room.memberCount = Number(reply.memberCount);
    room.seq = reply.events.length ? reply.events[0].roomSeq - 1n : 0n;
    this.tell(room, reply.events, reply.truncated, reply.firstSeq);
    room.seq = reply.roomSeq;
    const buffered = room.buffered;
    room.buffered = [];
    for (const f of buffered) {
      if (f.roomEpoch === room.epoch && !f.rejoin) this.live(room, f);
      else room.again = true; // it happened after the join was served: join once more
    }
  }

  private onFrame(f: RoomEvents): void {
    const room = this.rooms.get(f.roomId);
    if (!room) return;
    if (room.joining) { room.buffered.push(f); return; }
    if (f.rejoin || f.roomEpoch !== room.epoch) { this.rejoin(room); return; }
    this.live(room, f);
  }

  private live(room: Room, f: RoomEvents): void {
    const fresh = f.events.filter((e) => e.roomSeq > room.seq);
    if (fresh.length && fresh[0].roomSeq !== room.seq + 1n) { this.rejoin(room); return; } // a gap: the ring replays it
    if (f.memberCount) room.memberCount = Number(f.memberCount);
    this.tell(room, fresh, false, 0n);
  }

  private tell(room: Room, events: RoomEvent[], truncated: boolean, firstSeq: bigint): void {
    const out: RoomMessage[] = [];
    for (const e of events) {
      room.seq = e.roomSeq;
      if (e.kind === RoomEvent_Kind.POST) {
        const key = `${e.senderId}:${toHex(e.clientMessageId)}`;
        if (room.told.has(key)) continue; // posted again into a new epoch: told already
        room.told.add(key);
        if (room.told.size > TOLD_KEPT) room.told.delete(room.told.values().next().value as string);
      }
      out.push({ roomId: room.roomId, roomEpoch: room.epoch, roomSeq: e.roomSeq, kind: KINDS[e.kind] ?? "other",
        senderId: e.senderId, senderName: e.senderName, messageType: e.messageType, customType: e.customType,
        body: e.body, createdAtMs: e.createdAtMs, recalledSeq: e.recalledSeq, recalled: e.recalled });
    }
    if (out.length || truncated) {
      this.rt.emit({ type: "roomEvents", roomId: room.roomId, events: out, truncated, firstSeq, memberCount: room.memberCount });
    }
  }

  private rejoin(room: Room): void {
    this.joinRoom(room).catch(() => undefined); // a refusal is told as roomState "left"
  }
}
