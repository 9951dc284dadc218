/**
 * One authenticated connection of qim-js (the counterpart of qim.sdk.connection):
 * AUTH on open, requests matched to replies by request_id, server-initiated frames
 * (request_id 0) handed to callbacks, and liveness: a PING after `heartbeatMs` (half
 * the gateway's heartbeat) without sending, also while receiving or while an earlier
 * PING is still unanswered (the gateway closes a
 * connection it reads nothing from: docs/decisions/0077), or when a request waits
 * longer than `ackDeadlineMs`; no byte for `probeMs`
 * after that PING means the link is dead and it is closed (the runtime reconnects).
 * Any frame fault closes the connection (no resync).
 */

import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { ErrorSchema } from "../gen/qim/v1/common_pb";
import { AuthOkSchema, AuthSchema, KickedSchema, PingSchema, type AuthOk } from "../gen/qim/v1/connection_pb";
import { PushEventsSchema, type PushEvents } from "../gen/qim/v1/mailbox_pb";
import { RoomEventsSchema, type RoomEvents } from "../gen/qim/v1/room_pb";
import { ReadSyncSchema, SessionDeltaSchema, type ReadSync, type SessionDelta } from "../gen/qim/v1/session_pb";
import { ConnectionLost, serverError } from "./errors";
import { encodeFrame, FrameDecoder, type Frame } from "./frame";
import { Op } from "./protocol";
import type { Dialer, Transport } from "./transport";

export const CLIENT_VERSION = "qim-js/0.1";

/** Timing of one connection (milliseconds). */
export interface Timing {
  authTimeoutMs: number;
  ackDeadlineMs: number;
  probeMs: number;
}

export const DEFAULT_TIMING: Timing = { authTimeoutMs: 15000, ackDeadlineMs: 3000, probeMs: 4000 };

interface Waiter {
  resolve: (f: Frame) => void;
  reject: (e: Error) => void;
  since: number;
  timer: ReturnType<typeof setTimeout> | null;
}

/** An open, authenticated connection. */
export class Connection {
  onPush: (p: PushEvents) => void = () => undefined;
  onSessionDelta: (d: SessionDelta) => void = () => undefined;
  onReadSync: (r: ReadSync) => void = () => undefined;
  /** Further server frames by opcode -> handler(body): CONVERSATION_STATE_SYNC, READ_RECEIPT (convstate.ts). */
  frameHandlers = new Map<number, (body: Uint8Array) => void>();
  onRoomEvents: (f: RoomEvents) => void = () => undefined;
  onKicked: (reason: number, message: string, untilMs: number) => void = () => undefined;
  onClosed: (reason: string) => void = () => undefined;
  auth!: AuthOk;
  open = true;
  closeReason = "";
  private decoder = new FrameDecoder();
  private waiters = new Map<number, Waiter>();
  private nextId = 1;
  private lastRx = Date.now();
  private lastTx = Date.now();
  private pingAt = 0;
  private lastPing = 0;
  private ticker: ReturnType<typeof setInterval> | null = null;
  private heartbeatMs = 30000;

  private constructor(private readonly t: Transport, private readonly timing: Timing) {
    t.onMessage = (data) => this.received(data);
    t.onClose = (reason) => this.closed(reason);
  }

  /** Dial, AUTH with `token`; ServerError (UNAUTHENTICATED, RATE_LIMITED), ConnectionLost. */
  static async open(dial: Dialer, endpoint: string, token: string, timing = DEFAULT_TIMING): Promise<Connection> {
    const conn = new Connection(await dial(endpoint), timing);
    try {
      const body = toBinary(AuthSchema, create(AuthSchema, { token, clientVersion: CLIENT_VERSION }));
      const reply = await conn.request(Op.AUTH, body, timing.authTimeoutMs);
      if (reply.opcode !== Op.AUTH_OK) throw new ConnectionLost(`unexpected reply 0x${reply.opcode.toString(16)} to AUTH`);
      conn.auth = fromBinary(AuthOkSchema, reply.body);
    } catch (e) {
      conn.abort(`auth failed: ${(e as Error).message}`);
      throw e;
    }
    conn.heartbeatMs = Math.max(1000, Math.min(conn.auth.heartbeatS || 60, 120) * 500);
    conn.ticker = setInterval(() => conn.tick(), Math.min(500, conn.heartbeatMs / 4));
    return conn;
  }

  /**
   * Send a request; resolves with the reply frame. ServerError for an ERROR reply;
   * ConnectionLost after `timeoutMs` with no reply AND no byte received: bytes still
   * arriving may be this reply (a large page on a slow link), and a caller that gave
   * up then would ask for the page again while the first copy is still arriving
   * (issue 34 item 3, docs/decisions/0087).
   */
  request(opcode: number, body: Uint8Array, timeoutMs = 60000): Promise<Frame> {
    if (!this.open) return Promise.reject(new ConnectionLost(this.closeReason || "connection closed"));
    const rid = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    return new Promise<Frame>((resolve, reject) => {
      const w: Waiter = { resolve, reject, since: Date.now(), timer: null };
      const expire = (): void => {
        const idle = Date.now() - Math.max(w.since, this.lastRx);
        if (idle < timeoutMs) {
          w.timer = setTimeout(expire, timeoutMs - idle); // bytes arrived meanwhile: still alive
          return;
        }
        this.waiters.delete(rid);
        reject(new ConnectionLost(`no reply to 0x${opcode.toString(16)} and no byte within ${timeoutMs} ms`));
      };
      w.timer = setTimeout(expire, timeoutMs);
      this.waiters.set(rid, w);
      this.write(opcode, rid, body);
    });
  }

  /** A typed request: the reply body decoded with `schema`. */
  async call<S extends DescMessage>(opcode: number, body: Uint8Array, schema: S,
    timeoutMs?: number): Promise<MessageShape<S>> {
    return fromBinary(schema, (await this.request(opcode, body, timeoutMs)).body);
  }

  /** Close now (idempotent); waiting requests fail with ConnectionLost. */
  abort(reason: string): void {
    this.t.close(reason);
    this.closed(reason);
  }

  private write(opcode: number, rid: number, body: Uint8Array): void {
    try {
      for (const chunk of encodeFrame(opcode, rid, body)) this.t.send(chunk);
      this.lastTx = Date.now();
    } catch (e) {
      this.abort(`write failed: ${(e as Error).message}`);
    }
  }

  private received(data: Uint8Array): void {
    this.lastRx = Date.now();
    this.pingAt = 0;
    let frames: Frame[];
    try {
      frames = this.decoder.feedMessage(data);
    } catch (e) {
      this.abort(`bad frame from the server: ${(e as Error).message}`);
      return;
    }
    for (const f of frames) this.dispatch(f);
  }

  private dispatch(f: Frame): void {
    if (f.requestId === 0) {
      if (f.opcode === Op.PUSH_EVENTS) this.onPush(fromBinary(PushEventsSchema, f.body));
      else if (f.opcode === Op.SESSION_DELTA) this.onSessionDelta(fromBinary(SessionDeltaSchema, f.body));
      else if (f.opcode === Op.READ_SYNC) this.onReadSync(fromBinary(ReadSyncSchema, f.body));
      else if (f.opcode === Op.ROOM_EVENTS) this.onRoomEvents(fromBinary(RoomEventsSchema, f.body));
      else if (f.opcode === Op.KICKED) {
        const k = fromBinary(KickedSchema, f.body); // BANNED carries the reason and the end
        this.onKicked(k.reason, k.message, Number(k.untilMs));
      }
      else this.frameHandlers.get(f.opcode)?.(f.body);
      return; // PONG of a liveness probe, or a future server frame: bytes count as life
    }
    const w = this.waiters.get(f.requestId);
    if (!w) return;
    this.waiters.delete(f.requestId);
    if (w.timer) clearTimeout(w.timer);
    if (f.opcode === Op.ERROR) {
      const e = fromBinary(ErrorSchema, f.body);
      w.reject(serverError(e.code, e.message, e.retryAfterMs, Number(e.untilMs)));
    } else w.resolve(f);
  }

  private tick(): void {
    const now = Date.now();
    if (this.pingAt && now - this.pingAt > this.timing.probeMs && this.lastRx < this.pingAt) {
      this.abort(`no answer within ${this.timing.probeMs} ms of a PING`);
      return;
    }
    // keepalive: a frame every half heartbeat from the last one SENT, whether or not the last
    // PONG is back (a slow path's round trip must not stretch the gap: decisions 0077, 0095)
    const idle = now - this.lastTx >= this.heartbeatMs;
    const waiting = !this.pingAt && now - this.lastPing >= this.timing.ackDeadlineMs &&
      [...this.waiters.values()].some((w) => now - w.since > this.timing.ackDeadlineMs);
    if (!idle && !waiting) return;
    if (!this.pingAt) this.pingAt = now; // the probe runs from the oldest PING no byte followed yet
    this.lastPing = now;
    const rid = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    this.write(Op.PING, rid, toBinary(PingSchema, create(PingSchema, { clientTimeMs: BigInt(now) })));
  }

  private closed(reason: string): void {
    if (!this.open) return;
    this.open = false;
    this.closeReason = reason;
    if (this.ticker) clearInterval(this.ticker);
    const err = new ConnectionLost(reason);
    for (const w of this.waiters.values()) {
      if (w.timer) clearTimeout(w.timer);
      w.reject(err);
    }
    this.waiters.clear();
    this.onClosed(reason);
  }
}
