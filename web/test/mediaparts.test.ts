// qim-js large files in presigned parts (src/sdk/mediaparts.ts; issue 40): the declaration
// carries size, SHA-256 and type with the token; each part is PUT to its URL with exactly
// its bytes; a part that fails is sent again after a status read, alone; a refusal at the
// start is MediaRefused with the service's reason and nothing is PUT; parts that keep
// failing give up after PART_TRIES rounds with the last error.
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MediaRefSchema } from "../src/gen/qim/v1/media_pb";
import { toHex } from "../src/sdk/bytes";
import { MediaRefused } from "../src/sdk/media";
import { PART_TRIES, uploadParts } from "../src/sdk/mediaparts";

const PART = 4;
const DATA = new Uint8Array([0x25, 0x50, 0x44, 0x46, 0x2d, 1, 2, 3, 4, 5]); // "%PDF-" and 5 bytes: 3 parts
const REF = toBinary(MediaRefSchema, create(MediaRefSchema, { mediaId: "cd".repeat(16), mime: "application/pdf",
  size: 10n, name: "doc.pdf" }));

interface Seen { method: string; url: string; body: Uint8Array | null; headers: Record<string, string> }

/** A fake MediaService and store; `failPuts`: PUT URLs that fail once (a cut); `refuse`: the start's answer. */
function fake(failPuts: string[] = [], refuse: [number, string] | null = null, alwaysFail = false) {
  const seen: Seen[] = [];
  const fails = new Set(failPuts);
  const received = new Set<number>();
  const json = (o: object, status = 200) => new Response(JSON.stringify(o), { status });
  const fetcher = (async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const url = String(input), method = init.method ?? "GET";
    const body = init.body instanceof Blob ? new Uint8Array(await init.body.arrayBuffer())
      : typeof init.body === "string" ? new TextEncoder().encode(init.body) : null;
    seen.push({ method, url, body, headers: (init.headers ?? {}) as Record<string, string> });
    if (method === "PUT") {
      if (alwaysFail || fails.delete(url)) throw new TypeError("network");
      received.add(Number(url.split("part=")[1].split("&")[0]));
      return new Response(null, { status: 200 });
    }
    if (url.endsWith("/v1/media/uploads") && refuse) return new Response(refuse[1], { status: refuse[0] });
    const missing = [1, 2, 3].filter((n) => !received.has(n));
    const urls = Object.fromEntries(missing.map((n) => [String(n), `https://s3/o?part=${n}&try=${seen.length}`]));
    if (url.endsWith("/v1/media/uploads")) return json({ upload: "ab".repeat(16), part_bytes: PART, parts: 3, urls }, 201);
    if (url.endsWith("/complete")) return json({ ref: Buffer.from(REF).toString("base64") }, 201);
    return json({ upload: "ab".repeat(16), part_bytes: PART, parts: 3, received: [...received], urls });
  }) as typeof fetch;
  return { fetcher, seen };
}

const noSleep = async () => undefined;

describe("uploads in parts", () => {
  it("declares, puts every part's exact bytes, completes", async () => {
    const { fetcher, seen } = fake();
    const told: number[] = [];
    const up = await uploadParts("http://m/", "TOK", DATA, { name: "doc.pdf", progress: (s) => told.push(s) },
      { fetch: fetcher }, noSleep);
    expect(up.ref.mediaId).toBe("cd".repeat(16));
    const start = JSON.parse(new TextDecoder().decode(seen[0].body!));
    const digest = toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", DATA)));
    expect(start).toEqual({ size: 10, sha256: digest, mime: "application/pdf", name: "doc.pdf" });
    expect(seen[0].headers.Authorization).toBe("Bearer TOK");
    expect(seen.filter((s) => s.method === "PUT").map((s) => [...s.body!])).toEqual(
      [[...DATA.subarray(0, 4)], [...DATA.subarray(4, 8)], [...DATA.subarray(8)]]);
    expect(told.at(-1)).toBe(10);
    expect(seen.at(-1)!.url).toBe(`http://m/v1/media/uploads/${"ab".repeat(16)}/complete`);
  });

  it("a cut part is sent again alone, after a status read", async () => {
    const { fetcher, seen } = fake(["https://s3/o?part=2&try=1"]);
    await uploadParts("http://m", "TOK", DATA, {}, { fetch: fetcher }, noSleep);
    const order = seen.map((s) => (s.method === "PUT" ? `PUT ${s.url.split("part=")[1].split("&")[0]}` : s.url.split("/v1/media")[1]));
    expect(order).toEqual(["/uploads", "PUT 1", "PUT 2", "PUT 3", `/uploads/${"ab".repeat(16)}`, "PUT 2",
      `/uploads/${"ab".repeat(16)}/complete`]);
  });

  it("a refusal at the start puts nothing; parts that keep failing give up", async () => {
    const refused = fake([], [429, "daily upload quota of 10 bytes reached"]);
    const e = await uploadParts("http://m", "T", DATA, {}, { fetch: refused.fetcher }, noSleep).catch((x) => x);
    expect(e).toBeInstanceOf(MediaRefused);
    expect([e.status, e.reason]).toEqual([429, "daily upload quota of 10 bytes reached"]);
    expect(refused.seen.filter((s) => s.method === "PUT")).toEqual([]);
    const cut = fake([], null, true);
    const gone = await uploadParts("http://m", "T", DATA, {}, { fetch: cut.fetcher }, noSleep).catch((x) => x);
    expect([gone.status, gone.reason]).toEqual([0, "the object store could not be reached"]);
    expect(cut.seen.filter((s) => s.method === "PUT")).toHaveLength(3 * PART_TRIES);
    expect(cut.seen.some((s) => s.url.endsWith("/complete"))).toBe(false);
  });
});
