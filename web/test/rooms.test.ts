// qim-js chatrooms without a network (src/sdk/rooms.ts; the rules of qim/sdk/rooms.py):
// live frames during a join merge after its replay by seq, a gap re-joins from the last
// position, a truncated replay is told with its first seq, a post re-delivered in a new
// epoch is told once, a post without a join is FORBIDDEN before any request.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../src/gen/qim/v1/common_pb";
import {
  JoinRoomSchema, RoomEvent_Kind, RoomEventSchema, RoomEventsSchema, RoomJoinedSchema, type RoomEvents,
} from "../src/gen/qim/v1/room_pb";
import { ServerError } from "../src/sdk/errors";
import type { QimEvent } from "../src/sdk/events";
import { Op } from "../src/sdk/protocol";
import { Rooms, type RoomHost } from "../src/sdk/rooms";

const ROOM = 77n;
const cmidOf = (n: number) => { const b = new Uint8Array(16); b[15] = n; return b; };
const ev = (seq: number, body = `m${seq}`, cmid = cmidOf(seq)) => create(RoomEventSchema, {
  roomSeq: BigInt(seq), kind: RoomEvent_Kind.POST, senderId: 5n, body: new TextEncoder().encode(body), clientMessageId: cmid });

interface Pending { opcode: number; body: Uint8Array; resolve: (f: { opcode: number; body: Uint8Array }) => void }

function host() {
  const told: QimEvent[] = [];
  const requests: Pending[] = [];
  const h: RoomHost = {
    request: (opcode, body) => new Promise((resolve) => requests.push({ opcode, body, resolve })),
    emit: (e) => told.push(e), afterSync: [], onRoomEvents: () => undefined,
    maxBodyBytes: 1 << 20, sendTimeoutMs: 5000, retryBudgetMs: 5000,
  };
  return { h, told, requests };
}
const next = async (requests: Pending[]) => {
  for (let i = 0; i < 200 && !requests.length; i++) await new Promise((r) => setTimeout(r, 1));
  return requests.shift()!;
};
const joined = (fields: object) => ({ opcode: Op.ROOM_JOINED, body: toBinary(RoomJoinedSchema, create(RoomJoinedSchema, { roomId: ROOM, ...fields })) });
const live = (epoch: bigint, ...events: ReturnType<typeof ev>[]): RoomEvents => create(RoomEventsSchema, { roomId: ROOM, roomEpoch: epoch, events });
const seqs = (told: QimEvent[]) => told.flatMap((e) => (e.type === "roomEvents" ? e.events.map((m) => `${m.roomEpoch}:${m.roomSeq}`) : []));
const settle = () => new Promise((r) => setTimeout(r, 10));

describe("qim-js rooms", () => {
  it("merges, re-joins on a gap, tells truncation and a re-posted post once", async () => {
    const { h, told, requests } = host();
    const rooms = new Rooms(h);
    const join = rooms.join(ROOM, 3);
    const first = await next(requests);
    expect(first.opcode).toBe(Op.JOIN_ROOM);
    expect(fromBinary(JoinRoomSchema, first.body).since).toBeUndefined();
    h.onRoomEvents(live(5n, ev(3), ev(4))); // live while the join is served
    first.resolve(joined({ roomEpoch: 5n, roomSeq: 3n, events: [ev(1), ev(2), ev(3)] }));
    await join;
    expect(seqs(told)).toEqual(["5:1", "5:2", "5:3", "5:4"]);

    h.onRoomEvents(live(5n, ev(6))); // 5 is missing
    const again = await next(requests);
    const since = fromBinary(JoinRoomSchema, again.body).since!;
    expect([since.roomEpoch, since.roomSeq]).toEqual([5n, 4n]);
    again.resolve(joined({ roomEpoch: 5n, roomSeq: 7n, truncated: true, firstSeq: 6n, events: [ev(6), ev(7)] }));
    await settle();
    const cut = told.filter((e) => e.type === "roomEvents" && e.truncated);
    expect(cut.length).toBe(1);
    expect(cut[0].type === "roomEvents" && cut[0].firstSeq).toBe(6n);

    h.onRoomEvents(live(9n)); // another epoch: the RoomWriter restarted
    const third = await next(requests);
    expect(fromBinary(JoinRoomSchema, third.body).since!.roomEpoch).toBe(5n);
    third.resolve(joined({ roomEpoch: 9n, roomSeq: 2n, truncated: true, firstSeq: 1n,
      events: [ev(1, "m7", cmidOf(7)), ev(2, "new", cmidOf(99))] }));
    await settle();
    const bodies = told.flatMap((e) => (e.type === "roomEvents" ? e.events.map((m) => new TextDecoder().decode(m.body)) : []));
    expect(bodies.filter((b) => b === "m7").length).toBe(1);
    expect(bodies[bodies.length - 1]).toBe("new");
    expect(seqs(told).slice(-1)).toEqual(["9:2"]);
  });

  it("refuses a post to a room not joined and a bad room id before any request", async () => {
    const { h, requests } = host();
    const rooms = new Rooms(h);
    await expect(rooms.send(ROOM, new Uint8Array([1]))).rejects.toMatchObject({ code: ErrorCode.FORBIDDEN });
    await expect(rooms.join(0n)).rejects.toBeInstanceOf(ServerError);
    await expect(rooms.join(1n << 63n)).rejects.toMatchObject({ code: ErrorCode.INVALID_ARGUMENT });
    expect(requests.length).toBe(0);
  });
});
