/**
 * Runtime: the qim-js connection state machine (the counterpart of
 * qim.sdk.runtime; docs/sdk.md). States: connecting → syncing → ready ⇄
 * reconnecting; offline (stopped for a reason told to the app) and kicked (terminal).
 * Every (re)connect authenticates, REBUILDs first when the store asks, syncs the
 * mailbox (PULL_MAILBOX until has_more is false, each batch committed with its cursor)
 * and only then resends, in ordinal order, the pending sends the sync did not find
 * (our own mailbox entries carry the client_message_id), then pulls the session list.
 * PUSH_EVENTS only wake a pull, unless the cursor covers their position. KICKED REPLACED is terminal: no reconnect by itself.
 */

import { ErrorCode } from "../gen/qim/v1/common_pb";
import type { PushEvents } from "../gen/qim/v1/mailbox_pb";
import { Connection, DEFAULT_TIMING, type Timing } from "./connection";
import type { Reconnectable, ReadSource, RuntimeCore, RuntimeOptions, RuntimeStats } from "./core";

export type { RuntimeOptions } from "./core";
import { Banned, ConnectionLost, Kicked, NotConnected, retryable, ServerError, StorageTrouble, StoreError } from "./errors";
import type { ConnState, Listener, QimEvent, SendAck } from "./events";
import type { ApplyResult } from "./model";
import { KickReason, RATE_LIMITED_OPS } from "./protocol";
import { dialWithin, Gateways } from "./gateways";
import { Puller } from "./puller";
import { reconnectLoop } from "./reconnect";
import { RateGate } from "./rategate";
import { Backoff } from "./retry";
import { Sender } from "./sender";
import { tellApply } from "./tell";
import { SendWaiters } from "./waiters";
import type { LocalStore } from "./store";
import { dialWebSocket, type Dialer } from "./transport";
import { Watch } from "./watch";

/**
 * One device's connection, store and sends. Its helpers (puller, sender, sessions,
 * the reconnect loop) hold it as a RuntimeCore / Reconnectable (core.ts), never as
 * a Runtime.
 */
export class Runtime implements RuntimeCore, Reconnectable {
  state: ConnState = "offline";
  conn: Connection | null = null;
  ready = false;
  closing = true;
  maxBodyBytes = 1024 * 1024;
  readonly gate = new RateGate();
  readonly sender: Sender;
  readonly puller: Puller;
  /** Wake-up probes (the app calls watch.probe()) and storage trouble (watch.ts). */
  readonly watch: Watch;
  readonly afterSync: ((c: Connection) => Promise<void>)[] = [];
  readonly stats: RuntimeStats = { reconnects: 0, resends: 0, reconciled: 0, pushes: 0, pushesSkipped: 0, pushesApplied: 0,
    rebuilds: 0 };
  onSessionDelta: Connection["onSessionDelta"] = () => undefined;
  onReadSync: Connection["onReadSync"] = () => undefined;
  readonly frameHandlers = new Map<number, (body: Uint8Array) => void>(); // convstate.ts
  readonly pulledHandlers: RuntimeCore["pulledHandlers"] = []; // reactions.ts
  onRoomEvents: Connection["onRoomEvents"] = () => undefined; // rooms.ts
  readonly dial: Dialer;
  readonly timing: Timing;
  readonly sendTimeoutMs: number;
  readonly retryBudgetMs: number;
  private listeners = new Set<Listener>();
  private readonly waiters = new SendWaiters(); // the app's awaited sends (waiters.ts)
  private reconnecting: Promise<void> | null = null;
  private connecting = false;
  private refreshToken = false;
  private asking: Promise<string> | null = null; // the token provider's call in flight

  /** The gateways, in order of preference; the next one on failure (gateways.ts, decision 0082). */
  readonly gateways: Gateways;

  constructor(endpoint: string | readonly string[], private token: string, readonly store: LocalStore,
    private readonly opts: RuntimeOptions = {}) {
    this.gateways = new Gateways(endpoint);
    this.dial = opts.dial ?? dialWebSocket;
    this.timing = opts.timing ?? DEFAULT_TIMING;
    this.sendTimeoutMs = opts.sendTimeoutMs ?? 60000;
    this.retryBudgetMs = opts.retryBudgetMs ?? 30000;
    this.sender = new Sender(this);
    this.puller = new Puller(this);
    this.watch = new Watch(this);
  }

  // --- events ----------------------------------------------------------------------
  /** Listen to every event; returns the unsubscribe function. */
  on(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(e: QimEvent): void {
    for (const fn of this.listeners) {
      try {
        fn(e);
      } catch (err) {
        console.error("qim-js listener failed", err); // an app bug must not stop the SDK
      }
    }
  }

  setState(state: ConnState, reason = ""): void {
    if (state === this.state) return;
    this.state = state;
    this.emit({ type: "state", state, reason });
  }

  /** Tell one committed apply, in order (qim.sdk.tell), and settle the sends it resolved (tell.ts). */
  tell(r: ApplyResult, readSource: ReadSource = "local"): void {
    tellApply(this, r, readSource);
  }

  // --- lifecycle -------------------------------------------------------------------
  get connected(): boolean {
    return this.ready && this.conn !== null && this.conn.open;
  }

  /**
   * Connect, AUTH, (REBUILD,) sync, resend. Transient errors are retried for the
   * budget. With `keepTrying`, a failure that reconnecting can fix (unreachable,
   * transient) starts the reconnect loop instead of going offline.
   */
  async connect(keepTrying = false): Promise<void> {
    if (this.connected) return;
    if (this.state === "kicked") throw new Kicked(KickReason.REPLACED);
    if (this.reconnecting) return this.reconnecting;
    this.closing = false;
    this.connecting = true;
    this.waiters.stoppedBy = null; // a new start: waiters may wait again
    this.setState("connecting");
    const backoff = new Backoff(50, 2000, this.retryBudgetMs);
    try {
      for (;;) {
        try {
          await this.establish();
          return;
        } catch (e) {
          if (e instanceof ServerError && e.code === ErrorCode.UNAUTHENTICATED && this.opts.tokenProvider
            && !this.refreshToken) {
            this.refreshToken = true;
            continue;
          }
          if (retryable(e) && !this.closing) {
            try {
              await backoff.wait(e);
              continue;
            } catch {
              // budget spent: below
            }
          }
          const fatal = e instanceof StoreError || (e instanceof ServerError && !retryable(e)) || e instanceof Kicked;
          if (keepTrying && !fatal && !this.closing) {
            this.connecting = false;
            this.startReconnect(`connect failed: ${(e as Error).message}`);
            return;
          }
          this.closing = true;
          if ((this.state as ConnState) !== "kicked") {
            this.setState("offline", e instanceof Banned ? e.words : `connect failed: ${(e as Error).message}`);
          }
          throw e;
        }
      }
    } finally {
      this.connecting = false;
    }
  }

  /** Stop reconnecting and close; the store stays; pending rows stay for a later connect. */
  close(reason = "closed by the app"): void {
    this.closing = true;
    this.ready = false;
    if (this.state !== "kicked") this.setState("offline", reason);
    this.conn?.abort(reason);
    this.conn = null;
  }

  /** The gateway endpoint in use, or tried next. */
  get endpoint(): string {
    return this.gateways.current;
  }

  /** Test and UI hook: cut the connection as a network failure would. */
  abortConnection(): void {
    this.conn?.abort("aborted by host");
  }

  /**
   * The token for the next AUTH: the provider's when a fresh one is wanted. One provider
   * call at a time (issue 34 item 4): a caller that finds one in flight shares its token
   * or its error instead of asking again. Also the bearer token of media uploads (media.ts).
   */
  currentToken(): Promise<string> {
    const provider = this.opts.tokenProvider;
    if (!this.refreshToken || !provider) return Promise.resolve(this.token);
    this.asking ??= provider().then((token) => {
      this.token = token;
      this.refreshToken = false;
      return token;
    }).finally(() => {
      this.asking = null;
    });
    return this.asking;
  }

  async establish(reconnect = false): Promise<void> {
    const token = await this.currentToken();
    const dial = dialWithin(this.dial, this.timing.authTimeoutMs); // a frozen gateway never answers the upgrade
    const [conn, endpoint] = await this.gateways.dial((ep) => Connection.open(dial, ep, token, this.timing));
    if (reconnect) this.stats.reconnects++;
    if (conn.auth.userId !== this.store.meta.userId || conn.auth.deviceId !== this.store.meta.deviceId) {
      conn.abort("identity mismatch");
      this.closing = true;
      throw new StoreError("AUTH_OK identity differs from the store's (user, device)");
    }
    if (conn.auth.maxBodyBytes) this.maxBodyBytes = conn.auth.maxBodyBytes;
    this.conn?.abort("replaced by a new connection");
    conn.onPush = (p) => this.onPush(p);
    conn.onKicked = (r, m, u) => this.onKicked(r, m, u);
    conn.onSessionDelta = (d) => this.onSessionDelta(d);
    conn.onReadSync = (r) => this.onReadSync(r);
    conn.frameHandlers = this.frameHandlers;
    conn.onRoomEvents = (f) => this.onRoomEvents(f);
    conn.onClosed = (reason) => this.onClosed(conn, reason, endpoint);
    this.conn = conn;
    this.ready = false;
    this.sender.newConnection();
    this.setState("syncing");
    try {
      await this.syncAndReconcile(conn);
    } catch (e) {
      conn.abort("sync failed");
      throw e;
    }
  }

  private async syncAndReconcile(conn: Connection): Promise<void> {
    try {
      if (await this.store.rebuildNeeded()) await this.puller.rebuild(conn);
      await this.puller.pull();
    } catch (e) {
      if (!(e instanceof StorageTrouble)) throw e; // told as "storage"; the watch pulls again
    }
    const rows = await this.store.pendingSends();
    if (conn !== this.conn || !conn.open) throw new ConnectionLost("connection dropped during sync");
    for (const row of rows) this.sender.track(row);
    this.ready = true;
    for (const row of this.sender.unresolved()) {
      this.stats.resends++;
      this.sender.start(conn, row);
    }
    for (const hook of this.afterSync) {
      try {
        await hook(conn);
      } catch (e) {
        if (e instanceof ConnectionLost || e instanceof NotConnected) throw e;
        this.emit({ type: "syncFailed", code: (e as ServerError).code ?? ErrorCode.INTERNAL, message: String(e) });
      }
    }
    if (conn === this.conn && conn.open) this.setState("ready");
  }

  private onClosed(conn: Connection, reason: string, endpoint: string): void {
    if (conn !== this.conn) return;
    if (!this.closing) this.gateways.failed(endpoint); // lost: reconnect elsewhere first (decision 0082)
    this.ready = false;
    if (!this.closing && !this.connecting && !this.reconnecting) this.startReconnect(reason);
    else if (this.closing && this.state !== "kicked") this.setState("offline", reason);
  }

  private startReconnect(reason: string): void {
    this.setState("reconnecting", reason);
    this.reconnecting = reconnectLoop(this, this.opts.reconnectBackoffMs ?? [50, 2000],
      this.opts.tokenProvider !== undefined).finally(() => {
      this.reconnecting = null;
    });
  }

  private onKicked(reason: number, message = "", untilMs = 0): void {
    if (reason === KickReason.TOKEN_EXPIRED) {
      this.refreshToken = true; // the reconnect asks the provider (offline without one)
      return;
    }
    this.closing = true; // a kicked device does not fight back by reconnecting
    this.ready = false;
    if (reason === KickReason.BANNED) { // told as a ban (docs/decisions/0123, Amendment 2)
      const banned = new Banned(message, untilMs);
      this.setState("kicked", banned.words);
      this.emit({ type: "kicked", reason, message, untilMs });
      this.failWaiters(banned);
      return;
    }
    this.setState("kicked", `reason ${reason}`);
    this.emit({ type: "kicked", reason });
    this.failWaiters(new Kicked(reason));
  }

  private onPush(p: PushEvents): void {
    this.stats.pushes++;
    this.puller.notify(p); // a position (0033); its inline entries reach the store only past the cursor check (0156)
  }

  // --- requests and send waiters ------------------------------------------------------
  /** One request on the live connection (rate-charged ones pass the gate first). */
  async request(opcode: number, body: Uint8Array) {
    const conn = this.conn;
    if (!conn || !this.connected) throw new NotConnected();
    if (!RATE_LIMITED_OPS.has(opcode)) return conn.request(opcode, body, this.sendTimeoutMs);
    return this.gate.through(this.gate.ticket(), () => conn.request(opcode, body, this.sendTimeoutMs));
  }

  /** A promise of the send's SendAck (SendWaiters.wait: rejected at once once stopped for good). */
  waitAck(cmid: Uint8Array): Promise<SendAck> {
    return this.waiters.wait(cmid);
  }

  /** Settle the waiter of `cmid` with `ack`, or reject it with `err`; false when none waits. */
  settle(cmid: Uint8Array, ack: SendAck | null, err?: Error): boolean {
    return this.waiters.settle(cmid, ack, err);
  }

  /** Stopped for good (token refused, store mismatch): offline, waiting sends fail with `e`. */
  stop(reason: string, e: Error): void {
    this.closing = true;
    this.setState("offline", reason);
    this.failWaiters(e);
  }

  /** Ask the token provider before the next AUTH. */
  wantFreshToken(): void {
    this.refreshToken = true;
  }

  private failWaiters(e: Error): void {
    this.waiters.fail(e);
  }

}
