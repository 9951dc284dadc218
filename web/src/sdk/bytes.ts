/**
 * Byte and 64-bit helpers of qim-js. Every 64-bit id (user, device, group, tenant,
 * mailbox_seq, conversation_seq) is a `bigint` in memory and a canonical decimal
 * string on the page and in JSON; never a JS number (2^53 + 1 would round).
 */

export const U16_MAX = 0xffff;
export const U32_MAX = 0xffffffff;
export const U64_MAX = (1n << 64n) - 1n;
export const U128_MAX = (1n << 128n) - 1n;

/** Lowercase hex of `b`. */
export function toHex(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

/** Bytes of an even-length hex string; RangeError otherwise. */
export function fromHex(h: string): Uint8Array {
  if (h.length % 2 !== 0 || /[^0-9a-fA-F]/.test(h)) throw new RangeError("bad hex string");
  const out = new Uint8Array(h.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** a ‖ b ‖ ... */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const n = parts.reduce((s, p) => s + p.length, 0);
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** True when both arrays hold the same bytes. */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** `width` big-endian bytes of an unsigned bigint (RangeError when it does not fit). */
export function beBytes(v: bigint, width: number): Uint8Array {
  if (v < 0n || v >= 1n << BigInt(8 * width)) throw new RangeError(`value out of range for ${width} bytes`);
  const out = new Uint8Array(width);
  for (let i = width - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/** The unsigned big-endian integer of `b`. */
export function beValue(b: Uint8Array): bigint {
  let v = 0n;
  for (const x of b) v = (v << 8n) | BigInt(x);
  return v;
}

/**
 * A canonical decimal string ("0" or no leading zero, digits only) to a bigint in
 * [min, max]; RangeError for anything else (a JS number, "1e3", " 7", "007", "-1").
 */
export function parseU64(s: string, min = 0n, max = U64_MAX, what = "id"): bigint {
  if (typeof s !== "string" || !/^(0|[1-9][0-9]*)$/.test(s)) throw new RangeError(`${what} must be a decimal string`);
  const v = BigInt(s);
  if (v < min || v > max) throw new RangeError(`${what} out of range ${min}..${max}`);
  return v;
}

/** A bigint as its canonical decimal string. */
export function u64String(v: bigint): string {
  return v.toString(10);
}

/** A sortable IndexedDB key part for an unsigned 64-bit value (20 decimal digits). */
export function seqKey(v: bigint): string {
  return v.toString(10).padStart(20, "0");
}

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: false });

/** UTF-8 bytes of a string (byte-exact for every script and emoji). */
export function utf8(s: string): Uint8Array {
  return enc.encode(s);
}

/** A string of UTF-8 bytes (invalid sequences shown as U+FFFD). */
export function fromUtf8(b: Uint8Array): string {
  return dec.decode(b);
}
