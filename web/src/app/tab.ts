/**
 * Which device this tab is (docs/decisions/0058: a tab is a device; 0083: a copied tab
 * is another device). The device id lives in the tab's sessionStorage, so a reload
 * keeps it; but a tab opened with window.open(location.href) or Chromium's "Duplicate"
 * starts with a COPY of that sessionStorage, and signing in as the same device would
 * get the original tab kicked (KICKED{REPLACED}). So a tab claims its device with a
 * Web Lock ("qim-device:<user>:<device>", held until the tab closes or signs out): a
 * reload gets it at once (the old document released it), a copy finds it held by a live
 * tab and draws a new device. Without Web Locks (an insecure http:// origin other than
 * localhost) a BroadcastChannel asks the other tabs of the origin instead.
 */

const held = new Map<string, () => void>(); // lock name → release
const CHANNEL = "qim-devices";
const ASK_MS = 300;
let channel: BroadcastChannel | null = null;

function lockName(user: string, device: string): string {
  return `qim-device:${user}:${device}`;
}

/** A random non-zero 62-bit device id (decimal). */
export function newDevice(): string {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return String(BigInt.asUintN(62, BigInt("0x" + [...b].map((x) => x.toString(16).padStart(2, "0")).join(""))) + 1n);
}

function lockNow(name: string): Promise<boolean> {
  return new Promise((resolve) => {
    navigator.locks.request(name, { ifAvailable: true }, (lock) => {
      resolve(lock !== null);
      return lock ? new Promise<void>((release) => held.set(name, release)) : undefined;
    }).catch(() => resolve(false));
  });
}

/** Without Web Locks: true when no other tab of the origin answers that it holds `name`. */
async function askOthers(name: string): Promise<boolean> {
  channel ??= new BroadcastChannel(CHANNEL);
  channel.onmessage = (ev) => {
    if (ev.data?.ask && held.has(ev.data.ask)) channel!.postMessage({ holds: ev.data.ask });
  };
  const answered = await new Promise<boolean>((resolve) => {
    const other = new BroadcastChannel(CHANNEL);
    const done = (v: boolean) => (other.close(), resolve(v));
    other.onmessage = (ev) => ev.data?.holds === name && done(true);
    setTimeout(() => done(false), ASK_MS);
    other.postMessage({ ask: name });
  });
  if (answered) return false;
  held.set(name, () => undefined);
  return true;
}

/**
 * Claim (user, device) for this tab: true when this tab holds it now (a first sign-in,
 * a reload), false when another live tab of this browser holds it (a copied tab).
 */
export async function claimDevice(user: string, device: string): Promise<boolean> {
  const name = lockName(user, device);
  if (held.has(name)) return true;
  return navigator.locks ? lockNow(name) : askOthers(name);
}

/** Let go of every claim (sign out): another tab may take the device. */
export function releaseDevices(): void {
  for (const release of held.values()) release();
  held.clear();
}
