import { create, toBinary } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AuthOkSchema } from "../src/gen/qim/v1/connection_pb";
import { Connection, DEFAULT_TIMING } from "../src/sdk/connection";
import { ConnectionLost } from "../src/sdk/errors";
import { encodeFrame, FrameDecoder } from "../src/sdk/frame";
import { Op } from "../src/sdk/protocol";
import type { Transport } from "../src/sdk/transport";

/** A peer that answers AUTH and then only what `answer` says (nothing: a dead link). */
function silentPeer(answer: (op: number, rid: number) => Uint8Array[] | null, heartbeatS = 60, delayMs = 0) {
  const written: number[] = [];
  const sentAt: number[] = [];
  const dec = new FrameDecoder();
  const t: Transport = {
    send: (chunk) => {
      for (const f of dec.feedMessage(chunk)) {
        written.push(f.opcode);
        sentAt.push(Date.now());
        const reply = f.opcode === Op.AUTH
          ? encodeFrame(Op.AUTH_OK, f.requestId, toBinary(AuthOkSchema, create(AuthOkSchema, { userId: 1n, deviceId: 1n,
            heartbeatS })))
          : answer(f.opcode, f.requestId);
        const deliver = (): void => { for (const c of reply ?? []) t.onMessage(c); };
        if (delayMs && f.opcode !== Op.AUTH) setTimeout(deliver, delayMs); // a slow path toward the client
        else for (const c of reply ?? []) queueMicrotask(() => t.onMessage(c));
      }
    },
    close: (reason) => queueMicrotask(() => t.onClose(reason)),
    onMessage: () => undefined,
    onClose: () => undefined,
  };
  return { dial: async () => t, written, sentAt, t };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("connection liveness", () => {
  it("an unanswered request probes with PING, and no byte after it closes the link", async () => {
    vi.useFakeTimers();
    const peer = silentPeer(() => null);
    const conn = await Connection.open(peer.dial, "ws://x/", "t");
    const pending = conn.request(Op.PULL_MAILBOX, new Uint8Array(0));
    pending.catch(() => undefined);
    await vi.advanceTimersByTimeAsync(DEFAULT_TIMING.ackDeadlineMs + 600);
    expect(peer.written.filter((op) => op === Op.PING).length).toBe(1);
    expect(conn.open).toBe(true);
    await vi.advanceTimersByTimeAsync(DEFAULT_TIMING.probeMs + 600);
    expect(conn.open).toBe(false);
    await expect(pending).rejects.toThrow(ConnectionLost);
  });

  it("a PONG keeps a slow request waiting", async () => {
    vi.useFakeTimers();
    const peer = silentPeer((op, rid) => (op === Op.PING ? encodeFrame(Op.PONG, rid, new Uint8Array(0)) : null));
    const conn = await Connection.open(peer.dial, "ws://x/", "t");
    conn.request(Op.PULL_MAILBOX, new Uint8Array(0)).catch(() => undefined);
    await vi.advanceTimersByTimeAsync(20_000);
    expect(conn.open).toBe(true);
    expect(peer.written.filter((op) => op === Op.PING).length).toBeGreaterThan(1);
    conn.abort("done");
  });

  it("a reply whose bytes arrive for longer than the request timeout is not given up (no second ask)", async () => {
    vi.useFakeTimers();
    let pullRid = 0;
    const peer = silentPeer((op, rid) => {
      if (op === Op.PULL_MAILBOX) pullRid = rid;
      return op === Op.PING ? encodeFrame(Op.PONG, rid, new Uint8Array(0)) : null;
    });
    const conn = await Connection.open(peer.dial, "ws://x/", "t");
    let failed: unknown = null;
    const reply = conn.request(Op.PULL_MAILBOX, new Uint8Array(0), 5000);
    reply.catch((e) => { failed = e; });
    await vi.advanceTimersByTimeAsync(0);
    const chunks = encodeFrame(Op.MAILBOX_BATCH, pullRid, new Uint8Array(40 * 1024), false, 1024);
    for (const c of chunks) { // one chunk a second: 40 s of a 5 s timeout, a byte every second
      await vi.advanceTimersByTimeAsync(1000);
      peer.t.onMessage(c);
    }
    await vi.advanceTimersByTimeAsync(0);
    expect(failed).toBe(null); // before: ConnectionLost after 5 s (and the puller asked again)
    expect((await reply).body.length).toBe(40 * 1024);
    conn.abort("done");
  });

  it("a connection that only receives still PINGs every half heartbeat (the gateway reaps silent ones)", async () => {
    vi.useFakeTimers();
    const peer = silentPeer((op, rid) => (op === Op.PING ? encodeFrame(Op.PONG, rid, new Uint8Array(0)) : null));
    const conn = await Connection.open(peer.dial, "ws://x/", "t");
    conn.onPush = () => undefined;
    for (let s = 0; s < 70; s += 1) { // a push every second for 70 s, nothing sent by the app
      for (const c of encodeFrame(Op.PUSH_EVENTS, 0, new Uint8Array(0))) peer.t.onMessage(c);
      await vi.advanceTimersByTimeAsync(1000);
    }
    // heartbeatS 60: a PING at least every 30 s of not sending (decision 0077)
    expect(peer.written.filter((op) => op === Op.PING).length).toBeGreaterThanOrEqual(2);
    expect(conn.open).toBe(true);
    conn.abort("done");
  });

  it("PINGs every half heartbeat from the last frame sent, not waiting for a slow PONG (decision 0095)", async () => {
    vi.useFakeTimers();
    // heartbeat 2 s: the gateway evicts a connection silent for 2 s at the user's cap;
    // every PONG takes 1.5 s to come back
    const peer = silentPeer((op, rid) => (op === Op.PING ? encodeFrame(Op.PONG, rid, new Uint8Array(0)) : null), 2, 1500);
    const conn = await Connection.open(peer.dial, "ws://x/", "t");
    await vi.advanceTimersByTimeAsync(20_000);
    const at = [...peer.sentAt, Date.now()];
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    expect(peer.written.filter((op) => op === Op.PING).length).toBeGreaterThanOrEqual(15);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(1000 + 250); // half the heartbeat + one tick
    expect(conn.open).toBe(true);
    conn.abort("done");
  });
});
