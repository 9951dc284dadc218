/** Frame faults (names as qim.errors, so the golden vectors name them alike). */

/** Any fault of the frame layer: the connection is closed, no resync. */
export class FrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
/** Fewer bytes than a header, or a WebSocket message not holding exactly one chunk. */
export class TruncatedFrame extends FrameError {}
/** Magic is not 0x5149. */
export class BadMagic extends FrameError {}
/** Header CRC-32 mismatch. */
export class BadCrc extends FrameError {}
/** Version is not 1. */
export class BadVersion extends FrameError {}
/** Unknown or reserved flag bits. */
export class BadFlags extends FrameError {}
/** A chunk body above 64 KiB. */
export class ChunkTooLarge extends FrameError {}
/** Chunks out of order, a changed COMPRESSED flag, or too many open frames. */
export class ChunkOrder extends FrameError {}
/** A reassembled or decompressed body above the bound (4 MiB). */
export class FrameTooLarge extends FrameError {}
/** An invalid zstd body. */
export class DecompressError extends FrameError {}
