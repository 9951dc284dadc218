/**
 * "Notify me when offline": the page's Web Push control (issue 39; docs/decisions/0143;
 * docs/sdk.md "Web Push on the page"). Shown only where the browser has `serviceWorker`
 * and `PushManager`. Turning it on asks the notification permission, registers the
 * service worker /sw.js (sw.ts), subscribes with the VAPID public key qim-web publishes in
 * /config.json (`vapidPublicKey`) and registers the subscription for this tab's device
 * (`client.push.register("webpush", …)`); turning it off or signing out calls
 * `client.push.unregister()` and drops the browser's subscription. A server whose
 * /config.json has no `vapidPublicKey` gets the control disabled, saying offline
 * notifications are not set up on this server (a click could only be refused). Every
 * refusal — the permission denied, the server's PushInvalid, a browser whose push
 * service refuses to subscribe (said as that, with the browser's words: its "permission
 * denied" is not the notification permission, which was given) — is said once, in the
 * control's status line beside it (not again in the page's error box).
 * The tab remembers "on" (sessionStorage) and registers again at every sign-in, as
 * docs/sdk.md asks of apps.
 *
 * Test hook: `window.qimTestPushSubscription` (a PushSubscription's JSON), when set, is
 * registered instead of asking the browser's push service (a headless browser reaches
 * none); everything else — permission, service worker, register — runs as for a person.
 */

import type { Client } from "../sdk/client";
import { fromSubscription, PushInvalid } from "../sdk/push";

/** What the page's /config.json says about Web Push. */
export interface PushConfig {
  vapidPublicKey?: string;
}

/** The browser's push service refused `pushManager.subscribe` (its message kept as `browserWords`). */
export class PushServiceRefused extends Error {
  constructor(readonly browserWords: string) {
    super(`this browser could not subscribe to its push service: ${browserWords}`);
    this.name = "PushServiceRefused";
  }
}

interface SubscriptionJson {
  endpoint?: string;
  keys?: Record<string, string>;
}

const ON_KEY = "qim.push"; // sessionStorage: this tab turned offline notifications on
const SW_URL = "/sw.js";

/** True where the page can offer Web Push (a service worker and the Push API). */
export function pushAvailable(): boolean {
  return "serviceWorker" in navigator && "PushManager" in window;
}

/** The 65 bytes of a VAPID public key in base64url; Error when it is not one. */
export function vapidKeyBytes(key: string): Uint8Array {
  const bare = key.replace(/=+$/, "");
  if (!/^[A-Za-z0-9_-]+$/.test(bare)) throw new Error("the server's VAPID public key is not base64url");
  const bin = atob(bare.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (bare.length % 4)) % 4));
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  if (bytes.length !== 65 || bytes[0] !== 4) throw new Error("the server's VAPID public key is not a P-256 point");
  return bytes;
}

/** The conversation (hex) a notification's click asked to open (`?conversation=`), once. */
export function wantedConversation(): string | null {
  const url = new URL(location.href);
  const id = url.searchParams.get("conversation");
  if (id === null) return null;
  url.searchParams.delete("conversation");
  history.replaceState(null, "", url.href); // a reload should not open it again
  return /^[0-9a-f]{1,64}$/.test(id) ? id : null;
}

/** The control in the page's header (module doc). */
export class PushView {
  private readonly button = document.createElement("button");
  private readonly status = document.createElement("span");
  private readonly onMessage = (e: MessageEvent) => {
    const d = e.data as { qim?: string; conversation?: string } | null;
    if (d?.qim === "open" && d.conversation) this.open(d.conversation);
  };

  constructor(private readonly client: Client, private readonly config: PushConfig,
    private readonly open: (conversation: string) => void) {}

  /**
   * Put the control in the header (only where pushAvailable()): disabled, with the reason,
   * when the server offers no VAPID key; else turn on again if this tab had it on.
   */
  mount(): void {
    if (!pushAvailable()) return;
    this.button.dataset.testid = "push-toggle";
    this.status.dataset.testid = "push-status";
    this.status.className = "push-status";
    document.getElementById("logout")?.before(this.button, this.status);
    if (!this.config.vapidPublicKey) { // nothing a click could do: say why instead of refusing later
      this.setState("unavailable", "Offline notifications are not set up on this server.");
      // for whoever runs the server (a newcomer on the demo asked how): where it is set up
      this.status.title = "The operator gives qim-web and the NotificationService a VAPID key: "
        + "QIM_PUSH_VAPID_PRIVATE_KEY_FILE (docs/operations.md, \"Push providers\").";
      return;
    }
    this.setState("off", "");
    this.button.onclick = () => void (this.button.dataset.state === "on" ? this.turnOff() : this.turnOn());
    navigator.serviceWorker.addEventListener("message", this.onMessage);
    if (sessionStorage.getItem(ON_KEY) === "on") void this.turnOn();
  }

  /** Remove the control (sign-out, re-login). */
  dispose(): void {
    this.button.remove();
    this.status.remove();
    if (pushAvailable()) navigator.serviceWorker.removeEventListener("message", this.onMessage);
  }

  private setState(state: "off" | "on" | "working" | "refused" | "unavailable", words: string): void {
    this.button.dataset.state = state;
    this.button.textContent = state === "on" ? "Stop offline notifications" : "Notify me when offline";
    this.button.disabled = state === "working" || state === "unavailable";
    this.status.textContent = words;
    this.status.dataset.state = state;
  }

  /** Said once, beside the control (not again in the error box: the same words twice read as two faults). */
  private refuse(words: string): void {
    sessionStorage.removeItem(ON_KEY);
    this.setState("refused", words);
  }

  /** Permission, service worker, subscription, PUSH_REGISTER; a refusal is said (module doc). */
  async turnOn(): Promise<void> {
    const key = this.config.vapidPublicKey ?? "";
    if (!key) return this.refuse("Offline notifications are not set up on this server.");
    this.setState("working", "Turning on offline notifications…");
    const permission = await Notification.requestPermission();
    if (permission !== "granted") {
      return this.refuse(permission === "denied"
        ? "Notifications are blocked for this page: allow them in the browser's site settings, then try again."
        : "Notifications were not allowed, so this page cannot notify you when offline.");
    }
    try {
      const sub = await this.subscription(key);
      const reg = fromSubscription(sub);
      await this.client.push.register("webpush", reg.token,
        { webpushP256dh: reg.webpushP256dh, webpushAuth: reg.webpushAuth, content: true });
      sessionStorage.setItem(ON_KEY, "on");
      this.setState("on", "You will be notified of new messages while this page is closed.");
    } catch (e) {
      const why = (e as Error).message;
      // PushInvalid's message starts with its code (INVALID_ARGUMENT: …): a person reads the rule only
      this.refuse(e instanceof PushInvalid ? `The server refused this browser's push subscription: ${why.replace(/^[A-Z_]+: /, "")}`
        : `Offline notifications could not be turned on: ${why}`); // PushServiceRefused's words name the push service
    }
  }

  private async subscription(key: string): Promise<SubscriptionJson> {
    const registration = await navigator.serviceWorker.register(SW_URL, { scope: "/" });
    await navigator.serviceWorker.ready;
    const given = (window as unknown as { qimTestPushSubscription?: SubscriptionJson }).qimTestPushSubscription;
    if (given) return given; // the test hook (module doc)
    const server = vapidKeyBytes(key);
    let sub = await registration.pushManager.getSubscription();
    const had = sub?.options.applicationServerKey;
    if (sub && (!had || !sameBytes(new Uint8Array(had), server))) {
      await sub.unsubscribe(); // made for another VAPID key: it could never be delivered to
      sub = null;
    }
    try {
      sub ??= await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: server as BufferSource });
    } catch (e) {
      // the browser's push service said no (Chromium: "Registration failed - permission denied"
      // even with notifications allowed): name the party that refused, keep its words
      throw new PushServiceRefused(e instanceof Error ? e.message : String(e));
    }
    return sub.toJSON() as SubscriptionJson;
  }

  /** PUSH_UNREGISTER and drop the browser's subscription; a failure is said. */
  async turnOff(): Promise<void> {
    this.setState("working", "Turning off offline notifications…");
    sessionStorage.removeItem(ON_KEY);
    try {
      await this.client.push.unregister();
      const registration = await navigator.serviceWorker.getRegistration("/");
      await (await registration?.pushManager.getSubscription())?.unsubscribe();
      this.setState("off", "");
    } catch (e) {
      this.refuse(`Offline notifications could not be turned off: ${(e as Error).message}`);
    }
  }

  /** At sign-out: turn off when on (QIM has no logout frame: unregister is the logout path, decision 0128). */
  async signOut(): Promise<void> {
    if (this.button.dataset.state === "on" || sessionStorage.getItem(ON_KEY) === "on") await this.turnOff();
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
