/**
 * The QIM web client: sign-in with a development token (qim-web signs it with the dev
 * stack's token key, as `qimctl token` does; or paste one), then the ChatView. The
 * tab is one device: its id is kept in sessionStorage, so a reload keeps the device's
 * IndexedDB store (history, cursor, pending sends) and signs in again by itself; a
 * kicked tab remembers why it was kicked and shows the banner instead of signing in again
 * (a kicked device never reconnects by itself: only "Sign in again" does). A copied tab
 * (window.open of this page, "Duplicate") finds its device held by the original tab and
 * becomes a new device (tab.ts; docs/decisions/0083). The browser's wake signals
 * (online, visible, resumed) probe the connection at once; storage trouble is a banner
 * that says what to do (docs/decisions/0084).
 */

import "./style.css";
import { Client, tokenClaims } from "../sdk/client";
import { banWords } from "../sdk/errors";
import { KickReason } from "../sdk/protocol";
import { PushView, wantedConversation } from "./pushview";
import { RoomView } from "./roomview";
import { claimDevice, newDevice, releaseDevices } from "./tab";
import { ChatView } from "./view";
import { deviceWords, kickLabel, kickWords, stateWords, storageWords } from "./words";

interface Config {
  gateway: string;
  /** Every gateway's WebSocket URL, in order: the page moves to the next on failure (decision 0082). */
  gateways?: string[];
  /** The name the page's store is kept under, whichever gateway is in use. */
  deployment?: string;
  devTokens: boolean;
  /** The MediaService's base URL (attach, thumbnails' originals: attach.ts, mediaview.ts); absent: no media. */
  media?: string;
  /** The VAPID public key the page subscribes with (base64url); absent: no Web Push (pushview.ts). */
  vapidPublicKey?: string;
}

interface Saved {
  user: string;
  name: string;
  device: string;
  token: string;
  kicked?: number | boolean; // the KICKED reason this tab stopped for
}

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const KEY = "qim.session";
let config: Config;
let client: Client | null = null;
let view: ChatView | null = null;
let roomView: RoomView | null = null;
let pushView: PushView | null = null;
let errorTimer: ReturnType<typeof setTimeout> | undefined;

function showError(message: string): void {
  const box = $("error");
  box.textContent = message;
  box.hidden = false;
  console.warn(message); // the box hides after 8 s; the console keeps it (and a test's failure names it)
  clearTimeout(errorTimer);
  errorTimer = setTimeout(() => (box.hidden = true), 8000);
}

function saved(): Saved | null {
  const raw = sessionStorage.getItem(KEY);
  return raw ? (JSON.parse(raw) as Saved) : null;
}

function save(s: Saved | null): void {
  if (s) sessionStorage.setItem(KEY, JSON.stringify(s));
  else sessionStorage.removeItem(KEY);
}

/** This tab's device id: random non-zero 62-bit, kept for the tab's life (reloads included). */
function tabDevice(): string {
  let d = sessionStorage.getItem("qim.device");
  if (!d) sessionStorage.setItem("qim.device", (d = newDevice()));
  return d;
}

async function devToken(user: string, name: string, device: string): Promise<string> {
  const r = await fetch("/api/dev-token", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ user, name, device }) });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error ?? `token refused (${r.status})`);
  return body.token as string;
}

function setConn(state: string, reason: string): void {
  const pill = $("conn");
  pill.hidden = false;
  pill.dataset.state = state;
  pill.textContent = stateWords(state);
  pill.title = reason;
}

function showKicked(reason: number, banned = ""): void {
  $("kicked-text").textContent = kickWords(reason, banned);
  $("kicked").dataset.reason = String(reason);
  $("kicked").hidden = false;
  setConn("kicked", kickLabel(reason));
}

function showStorage(state: string, message: string): void {
  const box = $("storage");
  box.hidden = state === "ok";
  box.dataset.state = state;
  $("storage-text").textContent = storageWords(state);
  box.title = message;
  $("storage-reload").hidden = state !== "lost";
}

/**
 * Sign in as `s`. The tab must hold its device first (tab.ts): when another live tab
 * holds it and `canRedraw` (a device this page chose, not one typed or named by a
 * pasted token), this tab becomes a new device; otherwise an Error says so.
 */
async function signIn(s: Saved, canRedraw = false): Promise<void> {
  stop();
  const named = s.token ? tokenClaims(s.token) : null;
  const user = named ? String(named.userId) : s.user;
  let device = named ? String(named.deviceId) : s.device;
  let given = s.token;
  if (!(await claimDevice(user, device))) {
    if (!canRedraw || !config.devTokens) {
      throw new Error(`device ${device} is open in another tab of this browser: close that tab or use another device`);
    }
    sessionStorage.setItem("qim.device", (device = newDevice())); // a copied tab: a device of its own
    given = "";
    await claimDevice(user, device);
  }
  const token = given || (await devToken(user, s.name, device));
  const claims = tokenClaims(token);
  const session = { user: String(claims.userId), name: claims.name || s.name, device: String(claims.deviceId), token };
  save(session);
  const c = await Client.open(config.gateways?.length ? config.gateways : config.gateway, token, {
    deployment: config.deployment,
    tokenProvider: config.devTokens ? () => devToken(session.user, session.name, session.device) : undefined,
  });
  client = c;
  c.mediaUrl = config.media ?? ""; // before the ChatView: its attach button is enabled by it
  (window as unknown as { qimClient: Client }).qimClient = c; // for debugging from the console
  c.on((e) => {
    if (e.type === "state") setConn(e.state, e.reason);
    if (e.type === "kicked") {
      save({ ...session, kicked: e.reason });
      showKicked(e.reason, e.reason === KickReason.BANNED ? banWords(e.message ?? "", e.untilMs ?? 0) : "");
    }
    if (e.type === "storage") showStorage(e.state, e.message);
    // the server's exact badge (UserBadgeState) in the tab's title, as messengers do
    if (e.type === "badge") document.title = e.badge > 0n ? `(${e.badge}) QIM` : "QIM";
  });
  view = new ChatView(c, showError);
  roomView = new RoomView(c, showError);
  const chats = view;
  pushView = new PushView(c, config, (id) => void chats.openConversation(id));
  pushView.mount();
  $("me").textContent = `${session.name || `user ${session.user}`} · ${deviceWords(session.device)}`;
  $("me").title = `user ${session.user}, device ${session.device} (this tab)`;
  $("login").hidden = true;
  $("app").hidden = false;
  $("logout").hidden = false;
  $("kicked").hidden = true;
  showStorage("ok", "");
  await view.load();
  const wanted = wantedConversation(); // a notification's click opened the page at a conversation
  void (wanted ? view.openConversation(wanted) : view.restore());
  void roomView.restore();
  c.connect(true).catch((e) => showError(`connect: ${(e as Error).message}`));
  // attachments a reload or a closed tab cut mid-upload are sent now, once (mediaoutbox.ts)
  if (c.mediaUrl) void c.resumeMedia().then((done) => {
    for (const [name, out] of done) {
      if (out instanceof Error) showError(`${name || "an attachment"} from before the reload was not sent: ${out.message}`);
    }
  }, (e) => showError(`attachments from before the reload: ${(e as Error).message}`));
}

function stop(): void {
  view?.dispose();
  roomView?.dispose();
  roomView = null;
  pushView?.dispose();
  pushView = null;
  client?.close();
  client?.store.close();
  view = client = null;
}

function showLogin(s: Saved | null): void {
  stop();
  $("app").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("conn").hidden = true; // nobody is signed in: no connection to speak of
  const f = $<HTMLFormElement>("login-form");
  if (s) {
    (f.elements.namedItem("user") as HTMLInputElement).value = s.user;
    (f.elements.namedItem("name") as HTMLInputElement).value = s.name;
  }
}

async function boot(): Promise<void> {
  const r = await fetch("/config.json");
  if (!r.ok) throw new Error(`/config.json answered ${r.status} ${r.statusText}`);
  config = (await r.json()) as Config;
  const f = $<HTMLFormElement>("login-form");
  f.onsubmit = (ev) => {
    ev.preventDefault();
    const v = (n: string) => (f.elements.namedItem(n) as HTMLInputElement).value.trim();
    // a pasted token names its user: the user id is needed only without one (not `required` in the form)
    if (!v("user") && !v("token")) return showError("sign in: give a user id, or paste a token");
    const device = v("device") || tabDevice();
    if (v("device")) sessionStorage.setItem("qim.device", device);
    signIn({ user: v("user"), name: v("name"), device, token: v("token") }, !v("device") && !v("token"))
      .catch((e) => showError(`sign in: ${e.message}`));
  };
  // the button is disabled in index.html until the handler above is set: a click before
  // (a slow /config.json) would submit the form natively, reload the page and lose what was typed
  f.querySelector<HTMLButtonElement>("[type=submit]")!.disabled = false;
  $("relogin").onclick = () => {
    const s = saved();
    if (s) signIn({ ...s, token: "", kicked: false }).catch((e) => showError(`sign in: ${e.message}`));
  };
  $("storage-reload").onclick = () => location.reload();
  $("logout").onclick = async () => {
    await pushView?.signOut(); // unregister: QIM has no logout frame (decision 0128)
    save(null);
    sessionStorage.removeItem("qim.open");
    releaseDevices();
    showLogin(null);
  };
  // wake signals: a laptop that slept, a network that came back, a tab shown or resumed
  const wake = () => void client?.runtime.watch.probe();
  window.addEventListener("online", wake);
  window.addEventListener("pageshow", (ev) => ev.persisted && wake());
  document.addEventListener("resume", wake);
  document.addEventListener("visibilitychange", () => document.visibilityState === "visible" && wake());
  const s = saved();
  if (s?.kicked) {
    showLogin(s);
    showKicked(typeof s.kicked === "number" ? s.kicked : 1);
  } else if (s) {
    const fresh = s.token && tokenClaims(s.token).exp * 1000 > Date.now() + 30000;
    await signIn(fresh ? s : { ...s, token: "" }, true).catch((e) => {
      showLogin(s);
      showError(`sign in: ${e.message}`);
    });
  } else showLogin(null);
}

boot().catch((e) => showError(`the page could not start: ${(e as Error).message}`));
