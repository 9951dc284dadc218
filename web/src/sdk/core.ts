/**
 * What the helpers of a Runtime use of it (the counterpart of qim.sdk.core): the
 * current connection, the store, the rate gate, events, apply-and-tell, send waiters
 * (`RuntimeCore`: the puller, the sender, the sessions), and what the reconnect loop
 * drives (`Reconnectable`). The Runtime implements both; the helpers import only this
 * module, never runtime.ts, so runtime.ts can own them without an import circle.
 */

import type { MailboxEntry } from "../gen/qim/v1/mailbox_pb";
import type { Connection, Timing } from "./connection";
import type { ConnState, QimEvent, SendAck } from "./events";
import type { Frame } from "./frame";
import type { ApplyResult } from "./model";
import type { RateGate } from "./rategate";
import type { LocalStore } from "./store";
import type { Dialer } from "./transport";

/** How a Runtime is built (client.ts ClientOptions adds the store's). */
export interface RuntimeOptions {
  dial?: Dialer;
  timing?: Timing;
  sendTimeoutMs?: number;
  reconnectBackoffMs?: [number, number];
  retryBudgetMs?: number;
  /** Asked for a fresh token after KICKED{TOKEN_EXPIRED} and once after UNAUTHENTICATED. */
  tokenProvider?: () => Promise<string>;
}


/** Where a read position came from, as a readPosition event tells it. */
export type ReadSource = "local" | "sync" | "server";

/** Counters of one runtime (Runtime.stats). */
export interface RuntimeStats {
  reconnects: number;
  resends: number;
  reconciled: number;
  pushes: number;
  /** Pushes whose position the committed cursor already covered: no pull (Puller.notify). */
  pushesSkipped: number;
  /** Inline pushes applied as a page, no pull (Puller.applyInline, decision 0156). */
  pushesApplied: number;
  rebuilds: number;
}

/** The narrow seam the puller, the sender and the sessions hold instead of the Runtime. */
export interface RuntimeCore {
  /** The current connection; null before the first and after close(). */
  readonly conn: Connection | null;
  /** A connection is up and its sync finished. */
  readonly connected: boolean;
  readonly store: LocalStore;
  /** Every request the gateway's send-rate buckets charge passes it. */
  readonly gate: RateGate;
  readonly stats: RuntimeStats;
  /** How long one request waits for its reply (ms). */
  readonly sendTimeoutMs: number;
  /** How long transient server errors are retried before they surface (ms). */
  readonly retryBudgetMs: number;
  /** Awaited after every (re)connect's sync on its connection (the session list pull). */
  readonly afterSync: ((c: Connection) => Promise<void>)[];
  /** Where the current and later connections send SESSION_DELTA and READ_SYNC. */
  onSessionDelta: Connection["onSessionDelta"];
  onReadSync: Connection["onReadSync"];
  /** Further server frames by opcode -> handler(body) (convstate.ts). */
  readonly frameHandlers: Map<number, (body: Uint8Array) => void>;
  /** The entries of every applied MAILBOX_BATCH (their reaction summaries: reactions.ts). */
  readonly pulledHandlers: ((entries: MailboxEntry[]) => void)[];
  /** Tell the app one event (a throwing listener never stops the SDK). */
  emit(e: QimEvent): void;
  /** Tell one committed apply, in order, and settle the sends it resolved. */
  tell(r: ApplyResult, readSource?: ReadSource): void;
  /** Settle the app's waiter of `cmid` with `ack` or `err`; false when none waits. */
  settle(cmid: Uint8Array, ack: SendAck | null, err?: Error): boolean;
  /** One request on the live connection (NotConnected without one). */
  request(opcode: number, body: Uint8Array): Promise<Frame>;
}

/** What the reconnect loop (reconnect.ts) drives. */
export interface Reconnectable {
  /** True once the app closed it or it stopped for good: the loop ends. */
  readonly closing: boolean;
  /** One whole attempt: AUTH, REBUILD when needed, sync, resends, list pull. */
  establish(reconnect: boolean): Promise<void>;
  /** Ask the token provider before the next AUTH. */
  wantFreshToken(): void;
  /** Stopped for good: offline with `reason`, waiting sends fail with `e`. */
  stop(reason: string, e: Error): void;
  setState(state: ConnState, reason?: string): void;
}
