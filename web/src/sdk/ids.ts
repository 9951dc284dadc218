/**
 * Id derivations of qim-js, equal to qim/_core/ids (docs/protocol.md; the DESIGN table
 * of ids) and checked against tests/vectors/ids.json. BLAKE3 from @noble/hashes.
 * Hash inputs are fixed-width big-endian: tenant u128 (16 bytes), user/device/group/
 * room u64, shard u32, event_type u8, ordinal u64; ids are 16 bytes, never all zero.
 * Every integer argument is a bigint (or a small number where it is a count); IdError
 * for a value out of range.
 */

import { blake3 } from "@noble/hashes/blake3.js";
import { beBytes, beValue, concat, toHex, U128_MAX, U64_MAX, utf8 } from "./bytes";

/** A value out of an id's range, or a malformed 16-byte id. */
export class IdError extends RangeError {
  constructor(message: string) {
    super(message);
    this.name = "IdError";
  }
}

const D = (s: string) => utf8(s + "\0");
const DOMAIN = {
  direct: D("qim.direct.v1"), group: D("qim.group.v1"), room: D("qim.room.v1"), vbucket: D("qim.vbucket.v1"),
  commit: D("qim.commit-bucket.v1"), dispatch: D("qim.group-dispatch.v1"), event: D("qim.event.v1"),
  cmid: D("qim.cmid.v2"), endpoint: D("qim.endpoint-scope.v1"),
};
export const KIND_DIRECT = 1;
export const KIND_GROUP = 2;
export const KIND_ROOM = 3;
export const LANE_COUNT = 64;
const U48 = (1n << 48n) - 1n;

function big(v: bigint | number, lo: bigint, hi: bigint, what: string): bigint {
  const b = typeof v === "number" ? (Number.isInteger(v) ? BigInt(v) : NaN) : v;
  if (typeof b !== "bigint" || b < lo || b > hi) throw new IdError(`${what} out of range ${lo}..${hi}`);
  return b;
}
const tenant16 = (t: bigint | number) => beBytes(big(t, 0n, U128_MAX, "tenant"), 16);
const nz64 = (v: bigint | number, what: string) => beBytes(big(v, 1n, U64_MAX, what), 8);
const h = (...parts: Uint8Array[]) => blake3(concat(...parts));

/** 16 non-zero bytes, else IdError. */
export function id16(v: Uint8Array, what = "id"): Uint8Array {
  if (!(v instanceof Uint8Array) || v.length !== 16 || v.every((x) => x === 0)) {
    throw new IdError(`${what} must be 16 non-zero bytes`);
  }
  return v;
}

function conversation(kind: number, digest: Uint8Array): Uint8Array {
  const out = new Uint8Array(16);
  out[0] = kind;
  out.set(digest.subarray(0, 15), 1);
  return out;
}

/** kind 1 ‖ BLAKE3("qim.direct.v1\0" ‖ tenant ‖ min(user) ‖ max(user))[0..15]. */
export function conversationIdDirect(tenant: bigint | number, a: bigint | number, b: bigint | number): Uint8Array {
  const t = tenant16(tenant);
  const x = big(a, 1n, U64_MAX, "user_a"), y = big(b, 1n, U64_MAX, "user_b");
  const [lo, hi] = x < y ? [x, y] : [y, x];
  return conversation(KIND_DIRECT, h(DOMAIN.direct, t, beBytes(lo, 8), beBytes(hi, 8)));
}

/** kind 2 ‖ BLAKE3("qim.group.v1\0" ‖ tenant ‖ group_id)[0..15]. */
export function conversationIdGroup(tenant: bigint | number, groupId: bigint | number): Uint8Array {
  return conversation(KIND_GROUP, h(DOMAIN.group, tenant16(tenant), nz64(groupId, "group_id")));
}

/** kind 3 ‖ BLAKE3("qim.room.v1\0" ‖ tenant ‖ room_id)[0..15]. */
export function conversationIdRoom(tenant: bigint | number, roomId: bigint | number): Uint8Array {
  return conversation(KIND_ROOM, h(DOMAIN.room, tenant16(tenant), nz64(roomId, "room_id")));
}

/** The kind byte (1 direct, 2 group, 3 room) of a conversation id; IdError otherwise. */
export function conversationKind(cid: Uint8Array): number {
  const kind = id16(cid, "conversation_id")[0];
  if (kind < 1 || kind > 3) throw new IdError(`unknown conversation kind ${kind}`);
  return kind;
}

/** BLAKE3("qim.commit-bucket.v1\0" ‖ tenant ‖ conversation_id)[0]. */
export function commitBucket(tenant: bigint | number, cid: Uint8Array): number {
  return h(DOMAIN.commit, tenant16(tenant), id16(cid, "conversation_id"))[0];
}

/** BLAKE3(tenant ‖ user)[0] & 63: the user's mailbox lane. */
export function laneId(tenant: bigint | number, user: bigint | number): number {
  return h(tenant16(tenant), nz64(user, "user_id"))[0] & (LANE_COUNT - 1);
}

/** u16 of BLAKE3("qim.vbucket.v1\0" ‖ tenant ‖ user)[0..2]. */
export function virtualBucket(tenant: bigint | number, user: bigint | number): number {
  const d = h(DOMAIN.vbucket, tenant16(tenant), nz64(user, "user_id"));
  return (d[0] << 8) | d[1];
}

/** virtual_bucket % shard_count (a power of two in 1..65536). */
export function mailboxShard(tenant: bigint | number, user: bigint | number, shardCount: number): number {
  const c = Number(big(shardCount, 1n, 65536n, "shard_count"));
  if (c & (c - 1)) throw new IdError("shard_count must be a power of two");
  return virtualBucket(tenant, user) % c;
}

/** [lane, virtual bucket, shard] of a user. */
export function userPlacement(tenant: bigint | number, user: bigint | number, shardCount: number): number[] {
  const bucket = virtualBucket(tenant, user);
  return [laneId(tenant, user), bucket, mailboxShard(tenant, user, shardCount)];
}

/** BLAKE3("qim.group-dispatch.v1\0" ‖ message_id ‖ shard u32)[0..16]. */
export function dispatchId(messageId: Uint8Array, shard: bigint | number): Uint8Array {
  return h(DOMAIN.dispatch, id16(messageId, "message_id"), beBytes(big(shard, 0n, 0xffffffffn, "shard"), 4))
    .slice(0, 16);
}

/** BLAKE3("qim.event.v1\0" ‖ dispatch_id ‖ user ‖ event_type u8)[0..16]. */
export function eventId(did: Uint8Array, user: bigint | number, eventType: number): Uint8Array {
  const et = big(eventType, 1n, 255n, "event_type");
  return h(DOMAIN.event, id16(did, "dispatch_id"), nz64(user, "user_id"), beBytes(et, 1)).slice(0, 16);
}

/**
 * The client_message_id of a store's `ordinal` (cmid v2): BLAKE3("qim.cmid.v2\0" ‖
 * store nonce (16 non-zero bytes) ‖ device u64 ‖ ordinal u64)[0..16].
 */
export function clientMessageId(nonce: Uint8Array, device: bigint | number, ordinal: bigint | number): Uint8Array {
  const n = id16(nonce, "store nonce");
  return h(DOMAIN.cmid, n, nz64(device, "device_id"), beBytes(big(ordinal, 0n, U64_MAX, "ordinal"), 8)).slice(0, 16);
}

/** 32 lowercase hex of BLAKE3("qim.endpoint-scope.v1\0" ‖ utf8(endpoint))[0..16]. */
export function endpointScope(endpoint: string): string {
  if (typeof endpoint !== "string" || endpoint === "") throw new IdError("canonical_endpoint must not be empty");
  return toHex(h(DOMAIN.endpoint, utf8(endpoint)).subarray(0, 16));
}

/** unix_ms (48) ‖ logical (16) ‖ region (16) ‖ writer (16) ‖ 0 (32); never all zero. */
export function composeMessageId(ms: bigint | number, logical: bigint | number, region: bigint | number,
  writer: bigint | number): Uint8Array {
  const v = (big(ms, 0n, U48, "unix_ms") << 80n) | (big(logical, 0n, 0xffffn, "logical") << 64n)
    | (big(region, 0n, 0xffffn, "region_id") << 48n) | (big(writer, 0n, 0xffffn, "writer_id") << 32n);
  if (v === 0n) throw new IdError("message_id must not be all zero");
  return beBytes(v, 16);
}

/** [unix_ms, logical, region, writer] of a message id; IdError on a non-zero reserved part. */
export function splitMessageId(mid: Uint8Array): bigint[] {
  const v = beValue(id16(mid, "message_id"));
  if (v & 0xffffffffn) throw new IdError("message_id reserved low 32 bits must be zero");
  return [v >> 80n, (v >> 64n) & 0xffffn, (v >> 48n) & 0xffffn, (v >> 32n) & 0xffffn];
}
