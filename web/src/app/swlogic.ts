/**
 * What the page's service worker (sw.ts) decides for one Web Push message, without any
 * browser API, so vitest checks it (docs/decisions/0143). The message is the cleartext
 * qim-notify sends (qim/notify/providers/webpush.py `message`, decision 0130): JSON of
 * strings `badge`, `badge_version`, `conversation` (hex; the Topic), `silent` ("1" for a
 * badge-only update), `message` (hex, alerts only) and, for an alert, `title` and `body`
 * (the body is a content-free "New message" when the device registered without content).
 *
 * The rule (decision 0135 item 7, on the device's side): a push whose badge_version is
 * below the highest this browser has seen is ignored whole — no notification, no badge —
 * because something newer (a read elsewhere, a recall) already changed the badge after it;
 * an equal version is shown (the service may send an alert with the recorded badge).
 */

/** A push message that is not QIM's alert JSON; the service worker shows nothing for it. */
export class PayloadInvalid extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PayloadInvalid";
  }
}

/** One QIM push message, parsed: badge and version are numbers (the absolute unread total). */
export interface PushPayload {
  badge: number;
  badgeVersion: number;
  conversation: string;
  silent: boolean;
  message: string;
  title: string;
  body: string;
}

/** What the worker does with a payload given the highest version seen: `show` a
 * notification, `badge` set the app badge (and record the version), or neither (`stale`). */
export interface Decision {
  show: boolean;
  badge: boolean;
  stale: boolean;
}

const DIGITS = /^[0-9]{1,15}$/; // below 2^53: exact as a JS number
const HEX = /^[0-9a-f]{0,64}$/;

function field(data: Record<string, unknown>, name: string): string {
  const v = data[name];
  if (v === undefined) return "";
  if (typeof v !== "string") throw new PayloadInvalid(`${name} is not a string`);
  return v;
}

/** The payload of a push message's text; PayloadInvalid naming what is wrong. */
export function parsePayload(text: string): PushPayload {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new PayloadInvalid("not JSON");
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw new PayloadInvalid("not a JSON object");
  const d = data as Record<string, unknown>;
  const badge = field(d, "badge"), version = field(d, "badge_version");
  if (!DIGITS.test(badge)) throw new PayloadInvalid("badge is not a decimal count");
  if (!DIGITS.test(version)) throw new PayloadInvalid("badge_version is not a decimal version");
  const conversation = field(d, "conversation"), message = field(d, "message");
  if (!HEX.test(conversation) || !HEX.test(message)) throw new PayloadInvalid("conversation or message is not hex");
  const silent = field(d, "silent") === "1";
  if (!silent && !conversation) throw new PayloadInvalid("an alert without a conversation");
  return { badge: Number(badge), badgeVersion: Number(version), conversation, silent, message,
    title: field(d, "title"), body: field(d, "body") };
}

/** The module doc's rule for `p` when `highest` is the highest badge_version seen (0: none). */
export function decide(p: PushPayload, highest: number): Decision {
  if (p.badgeVersion < highest) return { show: false, badge: false, stale: true };
  return { show: !p.silent, badge: true, stale: false };
}

/** The notification of an alert: tag = the conversation, so a newer alert of a
 * conversation replaces the older one; `data` is what notificationclick reads. */
export function notificationOf(p: PushPayload): { title: string; options: NotificationOptionsLike } {
  return {
    title: p.title || "New message",
    options: { body: p.body || "New message", tag: p.conversation, renotify: true,
      data: { conversation: p.conversation, message: p.message, badge: p.badge, badgeVersion: p.badgeVersion } },
  };
}

/** The options showNotification takes that the worker sets (renotify: alert again on replace). */
export interface NotificationOptionsLike {
  body: string;
  tag: string;
  renotify: boolean;
  data: { conversation: string; message: string; badge: number; badgeVersion: number };
}

/** The page's address that opens `conversation` (hex) under the worker's `scope` URL. */
export function conversationUrl(scope: string, conversation: string): string {
  const url = new URL(scope);
  if (HEX.test(conversation) && conversation) url.searchParams.set("conversation", conversation);
  return url.href;
}
