import { describe, expect, it } from "vitest";
import { decodeHeader, encodeFrame, encodeHeader, FrameDecoder, TruncatedFrame } from "../src/sdk/frame";
import { isNamedError, loadVectors, plain } from "./vectors";

const V = loadVectors("frame.json");
const FNS: Record<string, (...a: any[]) => unknown> = {
  encode_header: (...a: number[]) => encodeHeader(a[0], a[1], a[2], a[3], a[4]),
  decode_header: (buf: Uint8Array, off?: number) => decodeHeader(buf, off ?? 0),
  encode_frame: (op: number, rid: number, body: Uint8Array, compress: boolean, step: number) =>
    encodeFrame(op, rid, body, compress, step),
};
const num = (a: unknown[]) => a.map((x) => (typeof x === "bigint" ? Number(x) : x));

describe("frame golden vectors (tests/vectors/frame.json)", () => {
  it("has cases for every function", () => {
    expect(new Set(V.cases.map((c: any) => c.fn))).toEqual(new Set(Object.keys(FNS)));
  });
  for (const [i, c] of V.cases.entries()) {
    it(`${i} ${c.fn}${c.error ? " → " + c.error : ""}`, () => {
      const call = () => FNS[c.fn](...num(c.args));
      if (c.error) {
        let err: unknown;
        try {
          call();
        } catch (e) {
          err = e;
        }
        expect(isNamedError(err, c.error), `expected ${c.error}, got ${err}`).toBe(true);
      } else {
        expect(plain(call())).toEqual(plain(c.result));
      }
    });
  }
  for (const [i, s] of V.streams.entries()) {
    it(`stream ${i}${s.error ? " → " + s.error : ""}`, () => {
      const dec = new FrameDecoder();
      if (s.error) {
        expect(() => dec.feed(s.stream)).toThrow(expect.objectContaining({ name: s.error }));
        expect(() => dec.feed(new Uint8Array(0))).toThrow(); // poisoned: no resync
        return;
      }
      const frames = dec.feed(s.stream).map((f) => [f.opcode, f.requestId, f.body]);
      expect(plain(frames)).toEqual(plain(s.frames));
      // the same stream one byte at a time gives the same frames
      const slow = new FrameDecoder();
      const got: unknown[] = [];
      for (let k = 0; k < s.stream.length; k++) {
        for (const f of slow.feed(s.stream.subarray(k, k + 1))) got.push([f.opcode, f.requestId, f.body]);
      }
      expect(plain(got)).toEqual(plain(s.frames));
      expect(slow.atBoundary()).toBe(true);
    });
  }
});

describe("one WebSocket message = one chunk", () => {
  it("reassembles chunks sent as separate messages", () => {
    const body = new Uint8Array(150_000).map((_, i) => i % 251);
    const chunks = encodeFrame(0x0302, 9, body);
    expect(chunks.length).toBe(3);
    const dec = new FrameDecoder();
    expect(dec.feedMessage(chunks[0])).toEqual([]);
    expect(dec.feedMessage(chunks[1])).toEqual([]);
    const [f] = dec.feedMessage(chunks[2]);
    expect(f.opcode).toBe(0x0302);
    expect(Buffer.from(f.body).equals(Buffer.from(body))).toBe(true);
  });
  it("refuses two chunks in one message and half a chunk", () => {
    const [a] = encodeFrame(0x0104, 0, new Uint8Array([1, 2, 3]));
    const two = new Uint8Array(a.length * 2);
    two.set(a);
    two.set(a, a.length);
    expect(() => new FrameDecoder().feedMessage(two)).toThrow(TruncatedFrame);
    expect(() => new FrameDecoder().feedMessage(a.subarray(0, a.length - 1))).toThrow(TruncatedFrame);
  });
});
