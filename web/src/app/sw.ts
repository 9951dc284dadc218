/**
 * The page's service worker, served by qim-web as /sw.js (scope: the page; built as its
 * own bundle by vite.config.ts). It receives QIM's Web Push messages (the browser has
 * already decrypted them, RFC 8291) and applies swlogic.ts (docs/decisions/0143):
 * - an alert shows one notification per conversation (tag = conversation: a newer alert
 *   replaces the older), title and body as the device registered (content or not), and
 *   sets the app badge (Badging API, where the browser has it) to the absolute badge;
 * - a silent update (`silent` = "1") only sets the badge;
 * - a push whose badge_version is below the highest seen for this subscription is ignored
 *   whole (kept in IndexedDB "qim-push", one record per subscription endpoint, compared and
 *   written in one readwrite transaction, so two pushes handled at once cannot both win);
 * - a click on a notification focuses an open page and tells it the conversation, or opens
 *   the page at `?conversation=<hex>`.
 * `self.qimHandlePush(text)` runs the push handler on a payload: what a test calls where no
 * push service exists (a headless browser); it is the same path the push event takes.
 */

import { conversationUrl, decide, type Decision, notificationOf, parsePayload } from "./swlogic";

// The few service-worker types used here (tsconfig's lib is the page's DOM, not WebWorker:
// both in one program conflict), written out rather than casting to any.
interface ExtendableEventLike { waitUntil(p: Promise<unknown>): void }
interface PushEventLike extends ExtendableEventLike { data: { text(): string } | null }
interface NotificationEventLike extends ExtendableEventLike {
  notification: { data?: { conversation?: string }; close(): void };
}
interface WindowClientLike { url: string; focus(): Promise<unknown>; postMessage(m: unknown): void }
interface SwScope {
  registration: {
    scope: string;
    showNotification(title: string, options: object): Promise<void>;
    pushManager?: { getSubscription(): Promise<{ endpoint: string } | null> };
  };
  clients: {
    matchAll(o: object): Promise<WindowClientLike[]>;
    openWindow(url: string): Promise<unknown>;
    claim(): Promise<void>;
  };
  navigator: { setAppBadge?(n: number): Promise<void>; clearAppBadge?(): Promise<void> };
  skipWaiting(): Promise<void>;
  addEventListener(type: string, fn: (e: never) => void): void;
  qimHandlePush?: (text: string) => Promise<Decision>;
}

const sw = self as unknown as SwScope;
const DB = "qim-push";
const STORE = "badge";

function openDb(): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

/** Decide for `p` against the highest version stored under `key`, and store p's version
 * when it is not stale — one readwrite transaction (IndexedDB serialises them). */
async function decideAndRecord(key: string, p: ReturnType<typeof parsePayload>): Promise<Decision> {
  const db = await openDb();
  try {
    return await new Promise<Decision>((resolve, reject) => {
      const tx = db.transaction(STORE, "readwrite");
      const store = tx.objectStore(STORE);
      let decision: Decision = { show: false, badge: false, stale: true };
      const get = store.get(key);
      get.onsuccess = () => {
        const seen = get.result as { version: number } | undefined;
        decision = decide(p, seen?.version ?? 0);
        if (decision.badge) store.put({ version: p.badgeVersion, badge: p.badge }, key);
      };
      tx.oncomplete = () => resolve(decision);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error ?? new Error("badge transaction aborted"));
    });
  } finally {
    db.close();
  }
}

async function setBadge(badge: number): Promise<void> {
  const nav = sw.navigator;
  if (!nav.setAppBadge) return; // no Badging API in this browser: the notification is all it shows
  try {
    await (badge > 0 ? nav.setAppBadge(badge) : (nav.clearAppBadge?.() ?? nav.setAppBadge(0)));
  } catch {
    // Chromium refuses the badge for a page that is not an installed app (NotAllowedError):
    // there is nowhere else to show it; the notification and the page's title carry it
  }
}

/** The push handler (module doc): parse, decide against IndexedDB, then show and badge. */
async function handlePush(text: string): Promise<Decision> {
  const p = parsePayload(text); // PayloadInvalid: not QIM's; the event fails, nothing shown
  const sub = await sw.registration.pushManager?.getSubscription();
  const decision = await decideAndRecord(sub?.endpoint ?? "", p);
  if (decision.badge) await setBadge(p.badge);
  if (decision.show) {
    const n = notificationOf(p);
    await sw.registration.showNotification(n.title, n.options);
  }
  return decision;
}

async function openConversation(conversation: string): Promise<void> {
  const url = conversationUrl(sw.registration.scope, conversation);
  const pages = await sw.clients.matchAll({ type: "window", includeUncontrolled: true });
  const page = pages.find((c) => c.url.startsWith(sw.registration.scope));
  if (page) {
    page.postMessage({ qim: "open", conversation });
    await page.focus();
  } else {
    await sw.clients.openWindow(url);
  }
}

sw.qimHandlePush = handlePush;
sw.addEventListener("install", (() => void sw.skipWaiting()) as (e: never) => void);
sw.addEventListener("activate", ((e: ExtendableEventLike) => e.waitUntil(sw.clients.claim())) as (e: never) => void);
sw.addEventListener("push", ((e: PushEventLike) => e.waitUntil(handlePush(e.data?.text() ?? ""))) as (e: never) => void);
sw.addEventListener("notificationclick", ((e: NotificationEventLike) => {
  e.notification.close();
  e.waitUntil(openConversation(e.notification.data?.conversation ?? ""));
}) as (e: never) => void);
