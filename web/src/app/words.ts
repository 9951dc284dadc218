/**
 * What the page says, in words a person reads (issue 34): why a session ended (every
 * KICKED reason its own sentence), the connection pill, sizes, storage trouble and the
 * device a tab is.
 */

import { KickReason } from "../sdk/protocol";

/** The sentence of a KICKED reason (docs/protocol.md "Kick reasons"); unknown ones name their number. */
export function kickWords(reason: number, banned = ""): string {
  switch (reason) {
    case KickReason.BANNED: // `banned`: qim-js's words, "banned until … UTC: <reason>" (decision 0123, Amendment 2)
      return `${banned ? banned.charAt(0).toUpperCase() + banned.slice(1) : "An operator banned this account"}. ` +
        "This page will not reconnect by itself.";
    case KickReason.REPLACED:
      return "This device signed in on another page or browser, so this page stopped. It will not reconnect by itself.";
    case KickReason.REVOKED:
      return "An operator revoked this device's sign-in. Sign in again to get a new one.";
    case KickReason.TOKEN_EXPIRED:
      return "Your sign-in expired and could not be renewed. Sign in again.";
    case KickReason.SERVER_SHUTDOWN:
      return "The server ended this session while shutting down. Sign in again.";
    default:
      return `The server ended this session (reason ${reason}): you may have been removed or banned. Sign in again.`;
  }
}

/** A short label of a KICKED reason (the pill's tooltip, sessionStorage). */
export function kickLabel(reason: number): string {
  return ({ [KickReason.REPLACED]: "signed in elsewhere", [KickReason.REVOKED]: "sign-in revoked",
    [KickReason.TOKEN_EXPIRED]: "sign-in expired", [KickReason.SERVER_SHUTDOWN]: "server shut down", [KickReason.BANNED]: "banned" } as
    Record<number, string>)[reason] ?? `ended by the server (reason ${reason})`;
}

/** The connection pill's words of a qim-js state. */
export function stateWords(state: string): string {
  return ({ connecting: "connecting…", syncing: "catching up…", ready: "online", reconnecting: "offline · reconnecting…",
    offline: "offline", kicked: "signed out" } as Record<string, string>)[state] ?? state;
}

/** Bytes as a person says them: "1.1 MB", "900 KB", "12 bytes" (1 MB = 1024 × 1024 bytes). */
export function sizeWords(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${+(bytes / (1024 * 1024)).toFixed(1)} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${bytes} bytes`;
}

/** The refusal of a message that is too long. */
export function tooLongWords(bytes: number, limit: number): string {
  return `Too long: ${sizeWords(bytes)}, the limit is ${sizeWords(limit)}. Shorten it or split it.`;
}

/** The banner of a storage event ("full", "lost"); "" when healthy. */
export function storageWords(state: string): string {
  if (state === "full") {
    return "Browser storage is full: new messages cannot be saved here and sending is paused. Free space " +
      "(close other tabs of this site or clear other sites' data); this page catches up by itself when it can write again.";
  }
  if (state === "lost") {
    return "This page's stored messages were deleted by the browser. It is fetching them again from the server; " +
      "if nothing appears, reload the page.";
  }
  return "";
}

/** A device as a person reads it: "Chrome tab · 7f3a" (the id's last four digits), the full id apart. */
export function deviceWords(device: string): string {
  const ua = navigator.userAgent;
  const browser = /Edg\//.test(ua) ? "Edge" : /Firefox\//.test(ua) ? "Firefox" : /Chrom(e|ium)\//.test(ua) ? "Chrome"
    : /Safari\//.test(ua) ? "Safari" : "browser";
  return `${browser} tab · ${device.slice(-4)}`;
}
