/**
 * Reads the golden vectors of qim/_core (tests/vectors/*.json, written by
 * tests/vectors/gen_vectors.py from the documented layouts alone). Integers of 16+
 * digits are kept exact as bigint (JSON.parse would round 2^64 − 1).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { fromHex } from "../src/sdk/bytes";

const DIR = fileURLToPath(new URL("../../tests/vectors/", import.meta.url));

/** Parse a vector file; {"hex"} → Uint8Array, long integers → bigint. */
export function loadVectors(name: string): any {
  const text = readFileSync(DIR + name, "utf-8").replace(/([\[,:]\s*)(-?\d{16,})(?=\s*[,\]}])/g, '$1{"$big":"$2"}');
  return JSON.parse(text, (_k, v) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      if (typeof v.$big === "string") return BigInt(v.$big);
      if (typeof v.hex === "string" && Object.keys(v).length === 1) return fromHex(v.hex);
    }
    return v;
  });
}

/** A value as comparable JSON-ish data (bytes → hex, bigint → decimal string). */
export function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return { hex: Buffer.from(v).toString("hex") };
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") return String(v);
  if (Array.isArray(v)) return v.map(plain);
  return v;
}

/** True when `e` is the error a vector names (ValueError: any RangeError). */
export function isNamedError(e: unknown, name: string): boolean {
  if (!(e instanceof Error)) return false;
  if (name === "ValueError") return e instanceof RangeError;
  return e.name === name;
}
