/**
 * Bounded exponential backoff for transient server errors (qim/sdk/retry.py):
 * UNAVAILABLE, RATE_LIMITED and MAILBOX_DIRTY mean "not now"; delays double from
 * 50 ms to 2 s, 30 s in all, never sooner than the server's retry_after_ms. Every
 * other error surfaces at once.
 */

import { retryable } from "./errors";

export const RETRY_START_MS = 50;
export const RETRY_CAP_MS = 2000;
export const RETRY_BUDGET_MS = 30000;

/** Resolve after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

/** Delays start, 2·start, … capped; throws the error once the budget would be passed. */
export class Backoff {
  private delay: number;
  private began = 0;

  constructor(private start = RETRY_START_MS, private cap = RETRY_CAP_MS, private budget: number | null = RETRY_BUDGET_MS) {
    this.delay = start;
  }

  /** Wait before the next attempt, or rethrow `err` when the budget is spent. */
  async wait(err: unknown): Promise<void> {
    const hint = (err as { retryAfterMs?: number }).retryAfterMs ?? 0;
    const d = Math.max(this.delay, hint);
    const now = Date.now();
    if (!this.began) this.began = now;
    if (this.budget !== null && now + d - this.began > this.budget) throw err;
    await sleep(d);
    this.delay = Math.min(this.delay * 2, this.cap);
  }
}

/** `await call()` again after each retryable ServerError until the budget is spent. */
export async function withRetry<T>(call: () => Promise<T>, backoff = new Backoff()): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (!retryable(e)) throw e;
      await backoff.wait(e);
    }
  }
}
