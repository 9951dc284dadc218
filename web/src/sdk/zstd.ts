/**
 * Bounded zstd decompression of COMPRESSED frame bodies (docs/protocol.md: a
 * decompressed body over 4 MiB closes the connection), with fzstd. The bound holds
 * whatever the frame claims: the frame header is read first (RFC 8878 §3.1.1), a
 * declared content size above the bound or a window above MAX_WINDOW_BYTES is refused
 * before anything is allocated, and the streaming decoder counts its output and stops
 * past the bound. One complete frame only: output that differs from the declared size
 * (a truncated body, trailing frames) is a DecompressError, as in qim/_core/frame.
 */

import { Decompress } from "fzstd";
import { DecompressError, FrameError, FrameTooLarge } from "./frameerrors";

/** Larger windows are refused: the server compresses at level 3 (window ≤ 8 MiB). */
export const MAX_WINDOW_BYTES = 8 * 1024 * 1024;

/** What a zstd frame header declares. */
export interface ZstdHeader {
  contentSize: number | null;
  windowSize: number;
}

/** Parse the header of the zstd frame at the start of `data`; DecompressError when invalid. */
export function zstdHeader(data: Uint8Array): ZstdHeader {
  if (data.length < 6 || data[0] !== 0x28 || data[1] !== 0xb5 || data[2] !== 0x2f || data[3] !== 0xfd) {
    throw new DecompressError("bad zstd frame header: not a zstd frame");
  }
  const fhd = data[4];
  if (fhd & 0x08) throw new DecompressError("bad zstd frame header: reserved bit set");
  const single = (fhd >> 5) & 1;
  const fcsFlag = fhd >> 6;
  const dictBytes = [0, 1, 2, 4][fhd & 3];
  let pos = 5;
  let windowSize = 0;
  if (!single) {
    const wd = data[pos++];
    const base = 2 ** (10 + (wd >> 3));
    windowSize = base + (base / 8) * (wd & 7);
  }
  pos += dictBytes;
  const fcsBytes = fcsFlag === 0 ? single : 1 << fcsFlag;
  if (data.length < pos + fcsBytes) throw new DecompressError("bad zstd frame header: truncated");
  let contentSize: number | null = null;
  if (fcsBytes) {
    let v = 0;
    for (let i = fcsBytes - 1; i >= 0; i--) v = v * 256 + data[pos + i];
    contentSize = fcsBytes === 2 ? v + 256 : v;
  }
  if (single) windowSize = contentSize ?? 0;
  return { contentSize, windowSize };
}

/**
 * `data` (one complete zstd frame) decompressed to at most `maxFrame` bytes.
 * FrameTooLarge past the bound (declared or produced), DecompressError when invalid.
 */
export function decompressBounded(data: Uint8Array, maxFrame: number): Uint8Array {
  const hdr = zstdHeader(data);
  if (hdr.contentSize !== null && hdr.contentSize > maxFrame) {
    throw new FrameTooLarge(`zstd content size ${hdr.contentSize} > ${maxFrame}`);
  }
  if (hdr.windowSize > MAX_WINDOW_BYTES) throw new DecompressError(`zstd window ${hdr.windowSize} too large`);
  const parts: Uint8Array[] = [];
  let total = 0;
  const stream = new Decompress((chunk) => {
    total += chunk.length;
    if (total > maxFrame) throw new FrameTooLarge(`decompressed body exceeds ${maxFrame}`);
    parts.push(chunk.slice());
  });
  try {
    stream.push(data, true);
  } catch (e) {
    if (e instanceof FrameError) throw e;
    throw new DecompressError(`bad zstd body: ${(e as Error).message}`);
  }
  if (hdr.contentSize !== null && total !== hdr.contentSize) {
    throw new DecompressError(`zstd frame gave ${total} bytes, declared ${hdr.contentSize}`);
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
