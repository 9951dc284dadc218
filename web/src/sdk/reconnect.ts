/**
 * The automatic reconnect of a Runtime after its connection dropped (the counterpart of
 * qim/sdk/reconnect.py). Backoff doubles from start to cap; each attempt is a whole
 * establish (AUTH, REBUILD when needed, mailbox sync, resends, list pull). It stops for
 * good when the token is refused (UNAUTHENTICATED; with a token provider after one more
 * try with a fresh token) or the store belongs to another identity, telling the app
 * "offline" with the reason; a RATE_LIMITED AUTH waits its hint; anything else tries again.
 */

import { ErrorCode } from "../gen/qim/v1/common_pb";
import { ServerError, StoreError } from "./errors";
import { sleep } from "./retry";
import type { Runtime } from "./runtime";

/** Reconnect `rt` until connected, closed, kicked or refused for good. */
export async function reconnectLoop(rt: Runtime, [start, cap]: [number, number], hasProvider: boolean): Promise<void> {
  let delay = start, hint = 0, refreshed = false;
  while (!rt.closing) {
    await sleep(Math.max(delay, hint));
    hint = 0;
    if (rt.closing) return;
    try {
      await rt.establish(true);
      return;
    } catch (e) {
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
