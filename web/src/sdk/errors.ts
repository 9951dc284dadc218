/** Errors qim-js raises to the app (the same kinds as qim.sdk, docs/sdk.md "Errors"). */

import { ErrorCode } from "../gen/qim/v1/common_pb";

/** The server refused: `code` is the wire ErrorCode, `retryAfterMs` its hint (0: none). */
export class ServerError extends Error {
  constructor(readonly code: ErrorCode, message: string, readonly retryAfterMs = 0) {
    super(`${ErrorCode[code] ?? code}: ${message}`);
    this.name = "ServerError";
  }
}

/**
 * A send policy refused the send for good (ERROR POLICY_REFUSED, code 13; decision 0099):
 * `message` is the policy's reason, to show the sender. Permanent: the send fails at once
 * (sendFailed), never retried. The counterpart of qim.sdk's PolicyRefused.
 */
export class PolicyRefused extends ServerError {
  constructor(message: string) {
    super(ErrorCode.POLICY_REFUSED, message);
    this.name = "PolicyRefused";
  }
}

/**
 * An operator banned the user (ERROR BANNED at AUTH, or KICKED{BANNED}; docs/decisions/0123,
 * Amendment 2): the runtime stops, never reconnects; `reason` the operator's reason,
 * `untilMs` the end (unix ms, 0 = until unbanned), `words` "banned until … UTC: reason".
 * The counterpart of qim.sdk's Banned.
 */
export class Banned extends ServerError {
  readonly words: string;
  constructor(readonly reason: string, readonly untilMs: number, words = "") {
    const told = words || banWords(reason, untilMs);
    super(ErrorCode.BANNED, told);
    this.words = told;
    this.name = "Banned";
  }
}

/** What a banned user is told (the gateway's words): "banned until 2026-12-31 00:00 UTC: reason". */
export function banWords(reason: string, untilMs: number): string {
  if (!untilMs) return `banned by a moderator: ${reason}`;
  const end = new Date(untilMs).toISOString().slice(0, 16).replace("T", " ");
  return `banned until ${end} UTC: ${reason}`;
}

/** The ServerError of one ERROR frame: PolicyRefused for a policy's refusal, Banned for a ban. */
export function serverError(code: ErrorCode, message: string, retryAfterMs = 0, untilMs = 0): ServerError {
  if (code === ErrorCode.BANNED) return new Banned(message.split(": ").slice(1).join(": ") || message, untilMs, message);
  return code === ErrorCode.POLICY_REFUSED ? new PolicyRefused(message) : new ServerError(code, message, retryAfterMs);
}

/** The connection dropped (the runtime reconnects by itself unless kicked or closed). */
export class ConnectionLost extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConnectionLost";
  }
}

/** No usable connection: connect() first. */
export class NotConnected extends Error {
  constructor(message = "call connect() first") {
    super(message);
    this.name = "NotConnected";
  }
}

/** The device logged in elsewhere (KICKED REPLACED): terminal, no reconnect. */
export class Kicked extends Error {
  constructor(readonly reason: number) {
    super(`kicked (reason ${reason})`);
    this.name = "Kicked";
  }
}

/** Refused before anything was stored (what the server would refuse). */
export class SendRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SendRefused";
  }
}

/** The local store belongs to another identity, or a store operation failed. */
export class StoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreError";
  }
}

/**
 * The browser's storage refused a write (docs/sdk.md "qim-js", "Storage"): `kind` "full"
 * (QuotaExceededError: nothing of the transaction was written) or "lost" (the database
 * was deleted or closed under the page). Not the app's fault and not permanent: the
 * runtime tells a "storage" event and retries by itself.
 */
export class StorageTrouble extends StoreError {
  constructor(readonly kind: "full" | "lost", message: string) {
    super(message);
    this.name = "StorageTrouble";
  }
}

/** Codes that mean "not now": retried with bounded backoff and the same cmid. */
export const RETRYABLE = new Set<ErrorCode>([ErrorCode.UNAVAILABLE, ErrorCode.RATE_LIMITED, ErrorCode.MAILBOX_DIRTY]);

/** True for a ServerError whose code is retryable. */
export function retryable(e: unknown): e is ServerError {
  return e instanceof ServerError && RETRYABLE.has(e.code);
}

export { ErrorCode };
