/**
 * One runtime's gate for the requests the gateway's send-rate buckets charge (the
 * contract of qim/sdk/rategate.py, decisions/0025, with a simpler estimate of the
 * refill interval): SEND_MESSAGE, MARK_READ, RECALL_MESSAGE, CREATE_GROUP, LEAVE_GROUP.
 *
 * Open (no refusal seen): a request passes at once, any number in flight. After a
 * RATE_LIMITED the gate is closed: nothing passes before the server's retry-after, then
 * one request at a time holds the single slot from transmission to answer, the one with
 * the smallest ticket first (tickets are taken when a request is first made, so sends
 * keep submission order), each PACE_MARGIN × the largest hint of the episode after the
 * one before. It opens again when the slot holder was admitted, nobody waits and the
 * pause passed. So a burst above the limit costs about one refusal per request, not a
 * storm of refusals.
 */

import { ErrorCode } from "../gen/qim/v1/common_pb";
import { ServerError } from "./errors";

export const PACE_MARGIN = 1.1;
export const NO_HINT_MS = 50;

interface Waiter {
  ticket: number;
  wake: () => void;
}

/** The gate (module docstring). */
export class RateGate {
  private closed = false;
  private busy = false;
  private until = 0;
  private interval = 0;
  private seq = 0;
  private queue: Waiter[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  refusals = 0;

  /** A place in line, taken when a request is first made. */
  ticket(): number {
    return this.seq++;
  }

  /** Run `fn` (one transmission) under the gate; RATE_LIMITED answers wait and go again. */
  async through<T>(ticket: number, fn: () => Promise<T>): Promise<T> {
    for (;;) {
      const slot = this.closed;
      if (slot) await this.acquire(ticket);
      try {
        const out = await fn();
        if (slot) this.release(true);
        return out;
      } catch (e) {
        const limited = e instanceof ServerError && e.code === ErrorCode.RATE_LIMITED;
        if (limited) this.refused((e as ServerError).retryAfterMs);
        if (slot) this.release(!limited);
        if (!limited) throw e;
      }
    }
  }

  /** A RATE_LIMITED answer: closed, nothing before the hint. */
  refused(retryAfterMs: number): void {
    const hint = retryAfterMs || NO_HINT_MS;
    this.refusals++;
    this.closed = true;
    this.interval = Math.max(this.interval, hint);
    this.until = Math.max(this.until, Date.now() + hint);
  }

  private acquire(ticket: number): Promise<void> {
    return new Promise((wake) => {
      const at = this.queue.findIndex((w) => w.ticket > ticket);
      this.queue.splice(at < 0 ? this.queue.length : at, 0, { ticket, wake });
      this.pump();
    });
  }

  private release(admitted: boolean): void {
    this.busy = false;
    if (admitted) this.until = Math.max(this.until, Date.now() + this.interval * PACE_MARGIN);
    if (admitted && !this.queue.length) {
      this.closed = false; // nobody waits: open again once the pause passed (checked by the next pump)
      this.interval = 0;
    }
    this.pump();
  }

  private pump(): void {
    if (this.busy || !this.queue.length || this.timer) return;
    const wait = this.until - Date.now();
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.pump();
      }, wait);
      return;
    }
    this.busy = true;
    this.queue.shift()!.wake();
  }
}
