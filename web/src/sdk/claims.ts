/**
 * The claims of a QIM token as qim-js reads them (qim.wire.tokenclaims): `sub` user,
 * `dev` device, `tenant` 32 lowercase hex digits, optional `name` and `exp`. Only the
 * gateway checks the signature; the client only needs to know whose store to open.
 */

import { parseU64 } from "./bytes";

/** The largest user, device or group id (bit 63 clear). */
export const U63_MAX = (1n << 63n) - 1n;

/** What a token says about its holder. */
export interface TokenClaims {
  tenant: bigint;
  userId: bigint;
  deviceId: bigint;
  name: string;
  exp: number;
}

/** Read the claims of a JWT (no signature check: that is the gateway's). RangeError when malformed. */
export function tokenClaims(token: string): TokenClaims {
  const parts = token.split(".");
  if (parts.length !== 3) throw new RangeError("a token has three dot-separated parts");
  let c: Record<string, unknown>;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
    c = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (ch) => ch.charCodeAt(0))));
  } catch {
    throw new RangeError("the token's claims are not base64url JSON");
  }
  const tenant = typeof c.tenant === "string" && /^[0-9a-f]{32}$/.test(c.tenant) ? BigInt("0x" + c.tenant) : -1n;
  if (tenant < 0n) throw new RangeError("the token's tenant must be 32 lowercase hex digits");
  return { tenant, userId: parseU64(String(c.sub), 1n, U63_MAX, "sub"), deviceId: parseU64(String(c.dev), 1n, U63_MAX, "dev"),
    name: typeof c.name === "string" ? c.name : "", exp: Number(c.exp ?? 0) };
}
