/**
 * The gateways one runtime may use, and moving to the next when one fails (the
 * counterpart of qim.sdk.gateways; docs/sdk.md "Several gateways", docs/decisions/0082).
 * An app gives one WebSocket endpoint or several, in order of preference. A connection
 * attempt tries the current gateway and, when it cannot be reached, does not answer
 * AUTH in time or answers UNAVAILABLE, each next one once. A connection that was up and
 * is lost makes the next gateway current, so the reconnect (after its jittered backoff,
 * reconnect.ts) goes elsewhere first. A refused token is not the gateway's fault: no move.
 */

import { ErrorCode } from "../gen/qim/v1/common_pb";
import { ConnectionLost, ServerError } from "./errors";
import type { Dialer } from "./transport";

/** The endpoints of a string (possibly comma-separated) or a list, in order; Error for none or a repeat. */
export function parseEndpoints(endpoint: string | readonly string[]): string[] {
  const items = typeof endpoint === "string" ? endpoint.split(",") : [...endpoint];
  const out = items.map((e) => e.trim()).filter((e) => e !== "");
  if (out.length === 0) throw new Error("no gateway endpoint given");
  if (new Set(out).size !== out.length) throw new Error(`a gateway endpoint is listed twice: ${out.join(", ")}`);
  return out;
}

/**
 * True for a failure another gateway may not have: unreachable, no answer in time, lost
 * in AUTH, UNAVAILABLE. Another ServerError (a refused token, RATE_LIMITED) is not.
 */
export function gatewayFault(e: unknown): boolean {
  return !(e instanceof ServerError) || e.code === ErrorCode.UNAVAILABLE;
}

/**
 * `dial` bounded to `ms`: a gateway that accepts TCP but never answers the WebSocket
 * upgrade (a frozen process) is ConnectionLost after `ms`, and its late transport closed.
 */
export function dialWithin(dial: Dialer, ms: number): Dialer {
  return (endpoint) => new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(new ConnectionLost(`no answer from ${endpoint} within ${ms} ms`));
    }, ms);
    dial(endpoint).then((t) => {
      clearTimeout(timer);
      if (late) t.close("too late");
      else resolve(t);
    }, (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/** The endpoints of one runtime and which one is current. */
export class Gateways {
  readonly endpoints: string[];
  private at = 0;
  /** How many times the runtime moved to another gateway. */
  moves = 0;

  constructor(endpoint: string | readonly string[]) {
    this.endpoints = parseEndpoints(endpoint);
  }

  /** The endpoint the next attempt tries first. */
  get current(): string {
    return this.endpoints[this.at];
  }

  /** `endpoint` failed an attempt or lost its connection: the next gateway becomes current. */
  failed(endpoint: string): void {
    if (this.endpoints.length > 1 && this.endpoints[this.at] === endpoint) {
      this.at = (this.at + 1) % this.endpoints.length;
      this.moves++;
    }
  }

  /**
   * Open a connection on the current gateway, else on each next one once; resolves the
   * result of `open` and the endpoint it used. Rejects with what the last gateway tried
   * rejected with; a failure that is not the gateway's (gatewayFault) at once.
   */
  async dial<T>(open: (endpoint: string) => Promise<T>): Promise<[T, string]> {
    let last: unknown;
    for (let i = 0; i < this.endpoints.length; i++) {
      const endpoint = this.current;
      try {
        return [await open(endpoint), endpoint];
      } catch (e) {
        if (!gatewayFault(e)) throw e;
        last = e;
        this.failed(endpoint);
      }
    }
    throw last;
  }
}
