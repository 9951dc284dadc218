/**
 * The app's awaited sends of one runtime (the counterpart of the waiters in
 * qim.sdk.ledger): one promise per client_message_id, settled once by its SEND_ACK, its
 * own mailbox entry or a permanent refusal. Once the runtime stopped for good (kicked,
 * token refused), every waiter is rejected with that cause and a new one is rejected at
 * once: a waiter registered after the stop would never settle.
 */

import { toHex } from "./bytes";
import type { SendAck } from "./events";

/** Waiters of sends by cmid, and the cause the runtime stopped for, if it did. */
export class SendWaiters {
  /** Why the runtime stopped for good (null: it did not, or a new connect began). */
  stoppedBy: Error | null = null;
  private waiters = new Map<string, { resolve: (a: SendAck) => void; reject: (e: Error) => void }>();

  /** A promise of the send's SendAck (Kicked, ServerError for a permanent refusal). */
  wait(cmid: Uint8Array): Promise<SendAck> {
    if (this.stoppedBy) return Promise.reject(this.stoppedBy);
    return new Promise((resolve, reject) => this.waiters.set(toHex(cmid), { resolve, reject }));
  }

  /** Resolve with `ack`, or reject with `err`; false when nobody waits for `cmid`. */
  settle(cmid: Uint8Array, ack: SendAck | null, err?: Error): boolean {
    const w = this.waiters.get(toHex(cmid));
    if (!w) return false;
    this.waiters.delete(toHex(cmid));
    if (ack) w.resolve(ack);
    else w.reject(err!);
    return true;
  }

  /** Stopped for good with `e`: reject every waiter, and later ones at once. */
  fail(e: Error): void {
    this.stoppedBy = e;
    for (const w of this.waiters.values()) w.reject(e);
    this.waiters.clear();
  }
}
