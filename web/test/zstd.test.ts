import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { fromHex, toHex } from "../src/sdk/bytes";
import { encodeHeader, FLAG_COMPRESSED, FrameDecoder, MAX_FRAME_BODY } from "../src/sdk/frame";
import { decompressBounded } from "../src/sdk/zstd";

// frames made by the server's zstandard library (test/gen_zstd.py)
const CASES: any[] = JSON.parse(readFileSync(new URL("./zstd.json", import.meta.url), "utf-8"));

describe("bounded zstd (4 MiB, as the server)", () => {
  for (const c of CASES) {
    it(c.name, () => {
      const frame = fromHex(c.frame);
      if (c.error) {
        expect(() => decompressBounded(frame, MAX_FRAME_BODY)).toThrow(expect.objectContaining({ name: c.error }));
        return;
      }
      const out = decompressBounded(frame, MAX_FRAME_BODY);
      if (c.len !== undefined) expect(out.length).toBe(c.len);
      else expect(toHex(out)).toBe(c.body);
    });
  }
  it("a COMPRESSED frame through the decoder", () => {
    const c = CASES.find((x) => x.name === "sized text");
    const body = fromHex(c.frame);
    const msg = new Uint8Array(20 + body.length);
    msg.set(encodeHeader(FLAG_COMPRESSED, 0x0302, 0, 4, body.length));
    msg.set(body, 20);
    const [f] = new FrameDecoder().feedMessage(msg);
    expect(toHex(f.body)).toBe(c.body);
  });
});
