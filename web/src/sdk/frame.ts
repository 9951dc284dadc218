/**
 * The QIM frame codec (docs/protocol.md "Transport and frame header"), byte-compatible
 * with qim/_core/frame and checked against the same golden vectors
 * (tests/vectors/frame.json; web/test/frame.test.ts).
 *
 * Header, 20 bytes big-endian: magic u16 0x5149 | version u8 1 | flags u8 (bit0
 * COMPRESSED, bit1 MORE, bit2 NEED_ACK reserved) | opcode u16 | chunk_index u16 |
 * request_id u32 | body_len u32 (≤ 64 KiB) | header_crc u32 = CRC-32 of bytes 0..15.
 * A frame is compressed whole (zstd) and split into chunks; chunks of different frames
 * interleave, reassembly is keyed by (opcode, request_id); reassembled and decompressed
 * bodies are bounded by 4 MiB (MAX_FRAME_BODY, as the server). Any FrameError poisons
 * the decoder: there is no resync, the connection is closed.
 */

import { crc32 } from "./crc32";
import { decompressBounded } from "./zstd";
import { FrameError, BadCrc, BadFlags, BadMagic, BadVersion, ChunkOrder, ChunkTooLarge, FrameTooLarge,
  TruncatedFrame } from "./frameerrors";

export * from "./frameerrors";

export const FRAME_MAGIC = 0x5149;
export const FRAME_VERSION = 1;
export const FRAME_HEADER_LEN = 20;
export const FLAG_COMPRESSED = 1;
export const FLAG_MORE = 2;
export const FLAGS_KNOWN = FLAG_COMPRESSED | FLAG_MORE;
export const MAX_CHUNK_BODY = 65536;
export const MAX_FRAME_BODY = 4 * 1024 * 1024;
export const MAX_PARTIAL_FRAMES = 16;

/** (flags, opcode, chunk_index, request_id, body_len) of one chunk. */
export type Header = [number, number, number, number, number];

/** One reassembled frame. */
export interface Frame {
  opcode: number;
  requestId: number;
  body: Uint8Array;
}

function checkInt(v: number, lo: number, hi: number, what: string): number {
  if (!Number.isInteger(v) || v < lo || v > hi) throw new RangeError(`${what} out of range ${lo}..${hi}`);
  return v;
}

/** The 20 header bytes. RangeError out of range, BadFlags, ChunkTooLarge. */
export function encodeHeader(flags: number, opcode: number, chunkIndex: number, requestId: number,
  bodyLen: number): Uint8Array {
  checkInt(flags, 0, 0xff, "flags");
  checkInt(opcode, 0, 0xffff, "opcode");
  checkInt(chunkIndex, 0, 0xffff, "chunk_index");
  checkInt(requestId, 0, 0xffffffff, "request_id");
  if (!Number.isInteger(bodyLen) || bodyLen < 0) throw new RangeError("body_len must be a non-negative integer");
  if (flags & ~FLAGS_KNOWN) throw new BadFlags(`unknown or reserved flag bits 0x${flags.toString(16)}`);
  if (bodyLen > MAX_CHUNK_BODY) throw new ChunkTooLarge(`chunk body_len ${bodyLen} > ${MAX_CHUNK_BODY}`);
  const out = new Uint8Array(FRAME_HEADER_LEN);
  const dv = new DataView(out.buffer);
  dv.setUint16(0, FRAME_MAGIC);
  dv.setUint8(2, FRAME_VERSION);
  dv.setUint8(3, flags);
  dv.setUint16(4, opcode);
  dv.setUint16(6, chunkIndex);
  dv.setUint32(8, requestId);
  dv.setUint32(12, bodyLen);
  dv.setUint32(16, crc32(out, 0, 16));
  return out;
}

/** Decode and check the 20 bytes at `offset`: magic, then CRC, version, flags, length. */
export function decodeHeader(buf: Uint8Array, offset = 0): Header {
  checkInt(offset, 0, Number.MAX_SAFE_INTEGER, "offset");
  if (buf.length - offset < FRAME_HEADER_LEN) throw new TruncatedFrame("fewer than 20 header bytes");
  const dv = new DataView(buf.buffer, buf.byteOffset + offset, FRAME_HEADER_LEN);
  const magic = dv.getUint16(0);
  if (magic !== FRAME_MAGIC) throw new BadMagic(`bad frame magic 0x${magic.toString(16)}`);
  if (crc32(buf, offset, offset + 16) !== dv.getUint32(16)) throw new BadCrc("frame header CRC mismatch");
  if (dv.getUint8(2) !== FRAME_VERSION) throw new BadVersion(`unknown frame version ${dv.getUint8(2)}`);
  const flags = dv.getUint8(3);
  if (flags & ~FLAGS_KNOWN) throw new BadFlags(`unknown or reserved flag bits 0x${flags.toString(16)}`);
  const bodyLen = dv.getUint32(12);
  if (bodyLen > MAX_CHUNK_BODY) throw new ChunkTooLarge(`chunk body_len ${bodyLen} > ${MAX_CHUNK_BODY}`);
  return [flags, dv.getUint16(4), dv.getUint16(6), dv.getUint32(8), bodyLen];
}

/**
 * The wire chunks (header + chunk body each) of one frame, MORE on all but the last.
 * qim-js never compresses what it sends (no zstd compressor in the browser; the server
 * accepts plain bodies), so `compress` must be false. FrameTooLarge above 4 MiB.
 */
export function encodeFrame(opcode: number, requestId: number, body: Uint8Array, compress = false,
  chunkBytes = MAX_CHUNK_BODY): Uint8Array[] {
  checkInt(opcode, 0, 0xffff, "opcode");
  checkInt(requestId, 0, 0xffffffff, "request_id");
  checkInt(chunkBytes, 1, MAX_CHUNK_BODY, "chunk_bytes");
  if (compress) throw new RangeError("qim-js sends uncompressed frames only");
  if (body.length > MAX_FRAME_BODY) throw new FrameTooLarge(`frame body ${body.length} > ${MAX_FRAME_BODY}`);
  const count = Math.max(1, Math.ceil(body.length / chunkBytes));
  const out: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const part = body.subarray(i * chunkBytes, (i + 1) * chunkBytes);
    const chunk = new Uint8Array(FRAME_HEADER_LEN + part.length);
    chunk.set(encodeHeader(i + 1 < count ? FLAG_MORE : 0, opcode, i, requestId, part.length));
    chunk.set(part, FRAME_HEADER_LEN);
    out.push(chunk);
  }
  return out;
}

interface Partial {
  next: number;
  compressed: boolean;
  parts: Uint8Array[];
  size: number;
}

/**
 * Incremental decoder. `feed` takes stream bytes (any split); `feedMessage` takes one
 * WebSocket message, which must hold exactly one chunk (docs/protocol.md "WebSocket").
 * Both return the frames completed. Any FrameError poisons the decoder.
 */
export class FrameDecoder {
  private buf: Uint8Array = new Uint8Array(0);
  private partials = new Map<string, Partial>();
  private poison: FrameError | null = null;

  constructor(private readonly maxFrame = MAX_FRAME_BODY, private readonly maxPartial = MAX_PARTIAL_FRAMES) {}

  /** Append stream bytes; return every frame they complete. */
  feed(data: Uint8Array): Frame[] {
    return this.guard(() => {
      const src = this.buf.length ? concatTwo(this.buf, data) : data;
      const out: Frame[] = [];
      let pos = 0;
      while (src.length - pos >= FRAME_HEADER_LEN) {
        const h = decodeHeader(src, pos);
        const end = pos + FRAME_HEADER_LEN + h[4];
        if (end > src.length) break;
        this.chunk(h, src.subarray(pos + FRAME_HEADER_LEN, end), out);
        pos = end;
      }
      this.buf = src.slice(pos);
      return out;
    });
  }

  /** One WebSocket message = one chunk exactly; TruncatedFrame when it holds less or more. */
  feedMessage(msg: Uint8Array): Frame[] {
    return this.guard(() => {
      const h = decodeHeader(msg, 0);
      if (msg.length !== FRAME_HEADER_LEN + h[4]) {
        throw new TruncatedFrame(`message of ${msg.length} bytes holds a chunk of ${FRAME_HEADER_LEN + h[4]}`);
      }
      const out: Frame[] = [];
      this.chunk(h, msg.subarray(FRAME_HEADER_LEN), out);
      return out;
    });
  }

  /** True when no partial chunk or reassembly is pending. */
  atBoundary(): boolean {
    return this.buf.length === 0 && this.partials.size === 0;
  }

  private guard(fn: () => Frame[]): Frame[] {
    if (this.poison) throw this.poison;
    try {
      return fn();
    } catch (e) {
      if (e instanceof FrameError) this.poison = e;
      throw e;
    }
  }

  private chunk(h: Header, body: Uint8Array, out: Frame[]): void {
    const [flags, opcode, index, rid] = h;
    const key = `${opcode}:${rid}`;
    const compressed = (flags & FLAG_COMPRESSED) !== 0;
    const more = (flags & FLAG_MORE) !== 0;
    const part = this.partials.get(key);
    if (!part) {
      if (index !== 0) throw new ChunkOrder(`frame ${key} starts at chunk ${index}`);
      if (body.length > this.maxFrame) throw new FrameTooLarge(`frame body exceeds ${this.maxFrame}`);
      if (!more) {
        out.push({ opcode, requestId: rid, body: this.finish(compressed, body.slice()) });
        return;
      }
      if (this.partials.size >= this.maxPartial) throw new ChunkOrder(`more than ${this.maxPartial} open frames`);
      this.partials.set(key, { next: 1, compressed, parts: [body.slice()], size: body.length });
      return;
    }
    if (index !== part.next) throw new ChunkOrder(`frame ${key}: chunk ${index}, expected ${part.next}`);
    if (compressed !== part.compressed) throw new ChunkOrder(`frame ${key}: COMPRESSED differs between chunks`);
    if (part.size + body.length > this.maxFrame) throw new FrameTooLarge(`reassembled body exceeds ${this.maxFrame}`);
    part.parts.push(body.slice());
    part.size += body.length;
    part.next += 1;
    if (!more) {
      this.partials.delete(key);
      const whole = new Uint8Array(part.size);
      let off = 0;
      for (const p of part.parts) {
        whole.set(p, off);
        off += p.length;
      }
      out.push({ opcode, requestId: rid, body: this.finish(compressed, whole) });
    }
  }

  private finish(compressed: boolean, body: Uint8Array): Uint8Array {
    return compressed ? decompressBounded(body, this.maxFrame) : body;
  }
}

function concatTwo(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
