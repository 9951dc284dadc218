/**
 * What a Runtime does on signals from outside the protocol (docs/sdk.md "qim-js"):
 *
 * - Wake-ups. A laptop that slept or a tab the browser froze holds a connection that may
 *   be dead without a FIN or RST; the heartbeat would notice only after its period and
 *   probe. On a wake signal (the app calls probe(): the browser went online, the tab
 *   became visible, a frozen page resumed) a PING goes out at once and no answer within
 *   PROBE_MS closes the connection, so the reconnect starts at once.
 * - Storage trouble. The LocalStore tells StorageTrouble (full, lost) and its end
 *   (storehealth.ts); each change is told to the app as a "storage" event. While the
 *   store cannot write, the mailbox pull is retried with doubling delays (RETRY_START_MS
 *   to RETRY_CAP_MS) so the tab catches up by itself when space comes back, not on the
 *   next incoming message; a re-opened (empty) database makes the runtime reconnect,
 *   which syncs it again from the server.
 */

import { create, toBinary } from "@bufbuild/protobuf";
import { PingSchema } from "../gen/qim/v1/connection_pb";
import type { RuntimeCore } from "./core";
import { ConnectionLost, type StorageTrouble } from "./errors";
import { Op } from "./protocol";

export const PROBE_MS = 2000;
export const RETRY_START_MS = 1000;
export const RETRY_CAP_MS = 8000;

/** What the watch needs of its runtime. */
export interface Watched extends RuntimeCore {
  readonly closing: boolean;
  readonly puller: { wake(): void };
  abortConnection(): void;
}

/** Wake-up probes and storage trouble of one runtime (module docstring). */
export class Watch {
  private retry: ReturnType<typeof setTimeout> | null = null;
  private delay = RETRY_START_MS;

  constructor(private readonly rt: Watched) {
    rt.store.health.onChange = (t) => this.storage(t);
    rt.store.health.onReopened = () => rt.abortConnection(); // the reconnect fills the empty store
  }

  /**
   * A wake signal: PING the connection now; no reply within `deadlineMs` closes it
   * (the runtime reconnects). Without an open connection nothing (the reconnect loop runs).
   */
  async probe(deadlineMs = PROBE_MS): Promise<void> {
    const conn = this.rt.conn;
    if (!conn?.open) return;
    try {
      await conn.request(Op.PING, toBinary(PingSchema, create(PingSchema, { clientTimeMs: BigInt(Date.now()) })),
        deadlineMs);
    } catch (e) {
      if (e instanceof ConnectionLost && conn.open) conn.abort(`no answer within ${deadlineMs} ms of a wake-up probe`);
    }
  }

  private storage(t: StorageTrouble | null): void {
    this.rt.emit({ type: "storage", state: t ? t.kind : "ok", message: t ? t.message : "" });
    if (t) return this.schedule();
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    this.delay = RETRY_START_MS;
    this.rt.puller.wake(); // catch up now with what could not be stored
  }

  private schedule(): void {
    if (this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      if (!this.rt.store.health.trouble || this.rt.closing) return;
      this.rt.puller.wake(); // a batch that commits ends the trouble (storage(null))
      this.delay = Math.min(this.delay * 2, RETRY_CAP_MS);
      this.schedule();
    }, this.delay);
  }
}
