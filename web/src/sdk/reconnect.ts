/**
 * The automatic reconnect of a Runtime after its connection dropped (the counterpart of
 * qim.sdk.reconnect). Backoff doubles from start to cap; each attempt is a whole
 * establish (AUTH, REBUILD when needed, mailbox sync, resends, list pull). It stops for
 * good when the token is refused (UNAUTHENTICATED; with a token provider after one more
 * try with a fresh token) or the store belongs to another identity, telling the app
 * "offline" with the reason; a RATE_LIMITED AUTH waits its hint; anything else tries again.
 * The waits (`reconnectWait`, docs/decisions/0078, as qim.sdk.reconnect): the first
 * attempt waits uniform(0, min(FIRST_SPREAD_MS, cap)) (the devices of a gateway that went
 * away do not come back in one burst), later ones their backoff jittered to ½..1½ of it;
 * a server's retry-after hint (RATE_LIMITED, or UNAVAILABLE from a full login queue) is
 * the earliest retry, stretched by up to 10 %.
 */

import { ErrorCode } from "../gen/qim/v1/common_pb";
import { Banned, ServerError, StoreError } from "./errors";
import { sleep } from "./retry";
import type { Reconnectable } from "./core";

export const FIRST_SPREAD_MS = 1000;

/** Milliseconds before the next attempt (module comment): `first` right after the loss. */
export function reconnectWait(delay: number, hint: number, first: boolean, cap: number): number {
  const wait = first ? Math.random() * Math.min(FIRST_SPREAD_MS, cap) : delay * (0.5 + Math.random());
  return hint > 0 ? Math.max(wait, hint * (1 + Math.random() / 10)) : wait;
}

/** Reconnect `rt` until connected, closed, kicked or refused for good. */
export async function reconnectLoop(rt: Reconnectable, [start, cap]: [number, number], hasProvider: boolean): Promise<void> {
  let delay = start, hint = 0, refreshed = false, first = true;
  while (!rt.closing) {
    await sleep(reconnectWait(delay, hint, first, cap));
    hint = 0;
    first = false;
    if (rt.closing) return;
    try {
      await rt.establish(true);
      return;
    } catch (e) {
      if (e instanceof Banned) { // banned: stopped for it, never retried (docs/decisions/0123, Amendment 2)
        rt.stop(e.words, e);
        return;
      }
      if (e instanceof ServerError && e.code === ErrorCode.UNAUTHENTICATED) {
        if (hasProvider && !refreshed) {
          refreshed = true;
          rt.wantFreshToken();
          continue;
        }
        rt.stop("token refused", e);
        return;
      }
      if (e instanceof StoreError) {
        rt.stop("store identity mismatch", e);
        return;
      }
      if (e instanceof ServerError) hint = e.retryAfterMs;
    }
    if (!rt.closing) rt.setState("reconnecting", "attempt failed");
    delay = Math.min(delay * 2, cap);
  }
}
