/**
 * The QIM web client: sign-in with a development token (qim-web signs it with the dev
 * stack's token key, as `qimctl token` does; or paste one), then the ChatView. The
 * tab is one device: its id is kept in sessionStorage, so a reload keeps the device's
 * IndexedDB store (history, cursor, pending sends) and signs in again by itself; a
 * kicked tab remembers it was kicked and shows the banner instead of signing in again
 * (a kicked device never reconnects by itself: only "Sign in again" does).
 */

import "./style.css";
import { Client, tokenClaims } from "../sdk/client";
import { RoomView } from "./roomview";
import { ChatView } from "./view";

interface Config {
  gateway: string;
  devTokens: boolean;
}

interface Saved {
  user: string;
  name: string;
  device: string;
  token: string;
  kicked?: boolean;
}

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const KEY = "qim.session";
let config: Config;
let client: Client | null = null;
let view: ChatView | null = null;
let roomView: RoomView | null = null;

function showError(message: string): void {
  const box = $("error");
  box.textContent = message;
  box.hidden = false;
  setTimeout(() => (box.hidden = true), 8000);
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
  if (!d) {
    const b = crypto.getRandomValues(new Uint8Array(8));
    d = String((BigInt.asUintN(62, BigInt("0x" + [...b].map((x) => x.toString(16).padStart(2, "0")).join("")))) + 1n);
    sessionStorage.setItem("qim.device", d);
  }
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
  pill.dataset.state = state;
  pill.textContent = state;
  pill.title = reason;
}

async function signIn(s: Saved): Promise<void> {
  stop();
  const token = s.token || (await devToken(s.user, s.name, s.device));
  const claims = tokenClaims(token);
  const session = { user: String(claims.userId), name: claims.name || s.name, device: String(claims.deviceId), token };
  save(session);
  const c = await Client.open(config.gateway, token, {
    tokenProvider: config.devTokens ? () => devToken(session.user, session.name, session.device) : undefined,
  });
  client = c;
  (window as unknown as { qimClient: Client }).qimClient = c; // for debugging from the console
  c.on((e) => {
    if (e.type === "state") setConn(e.state, e.reason);
    if (e.type === "kicked") {
      save({ ...session, kicked: true });
      $("kicked").hidden = false;
    }
  });
  view = new ChatView(c, showError);
  roomView = new RoomView(c, showError);
  $("me").textContent = `${session.name || "user"} · ${session.user} · device ${session.device}`;
  $("login").hidden = true;
  $("app").hidden = false;
  $("logout").hidden = false;
  $("kicked").hidden = true;
  await view.load();
  c.connect(true).catch((e) => showError(`connect: ${(e as Error).message}`));
}

function stop(): void {
  view?.dispose();
  roomView?.dispose();
  roomView = null;
  client?.close();
  client?.store.close();
  view = client = null;
}

function showLogin(s: Saved | null): void {
  stop();
  $("app").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  setConn("offline", "signed out");
  const f = $<HTMLFormElement>("login-form");
  if (s) {
    (f.elements.namedItem("user") as HTMLInputElement).value = s.user;
    (f.elements.namedItem("name") as HTMLInputElement).value = s.name;
  }
}

async function boot(): Promise<void> {
  config = (await (await fetch("/config.json")).json()) as Config;
  const f = $<HTMLFormElement>("login-form");
  f.onsubmit = (ev) => {
    ev.preventDefault();
    const v = (n: string) => (f.elements.namedItem(n) as HTMLInputElement).value.trim();
    const device = v("device") || tabDevice();
    if (v("device")) sessionStorage.setItem("qim.device", device);
    signIn({ user: v("user"), name: v("name"), device, token: v("token") }).catch((e) => showError(`sign in: ${e.message}`));
  };
  $("relogin").onclick = () => {
    const s = saved();
    if (s) signIn({ ...s, token: "", kicked: false }).catch((e) => showError(`sign in: ${e.message}`));
  };
  $("logout").onclick = () => {
    save(null);
    showLogin(null);
  };
  const s = saved();
  if (s?.kicked) {
    showLogin(s);
    $("kicked").hidden = false;
    setConn("kicked", "signed in elsewhere");
  } else if (s) {
    const fresh = s.token && tokenClaims(s.token).exp * 1000 > Date.now() + 30000;
    await signIn(fresh ? s : { ...s, token: "" }).catch((e) => showError(`sign in: ${e.message}`));
  } else showLogin(null);
}

void boot();
