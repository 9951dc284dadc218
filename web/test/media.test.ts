// qim-js media against a fake fetch and a fake gateway (src/sdk/media.ts; docs/sdk.md
// "Media"; decision 0138): the upload declares size, SHA-256 and the sniffed type with the
// bearer token, the answered reference goes out as a MEDIA send, a refusal is
// MediaRefused with the service's status and reason, a download is checked against the
// reference's SHA-256.
import "fake-indexeddb/auto";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MediaRefSchema } from "../src/gen/qim/v1/media_pb";
import { toHex } from "../src/sdk/bytes";
import { Client } from "../src/sdk/client";
import { fetchMedia, humanSize, MediaRefused, sniff, upload } from "../src/sdk/media";
import { MessageType } from "../src/sdk/protocol";
import { FakeGateway } from "./fakeserver";

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const TOKEN = `${b64({ alg: "EdDSA" })}.${b64({ sub: "1001", dev: "1", tenant: "0".repeat(32) })}.sig`;
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4, 5, 6, 7, 8]);
const sha = async (d: Uint8Array) => new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(d)));

interface Seen { url: string; method: string; headers: Record<string, string>; body: Uint8Array | null }

/** A fake MediaService: answers POST /v1/media with a reference of what arrived, or `refuse`. */
function fakeService(refuse: [number, string] | null = null, stored: Uint8Array = PNG) {
  const seen: Seen[] = [];
  const fake = (async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const body = init.body ? new Uint8Array(await (init.body as Blob).arrayBuffer()) : null;
    seen.push({ url: String(input), method: init.method ?? "GET", headers: init.headers as Record<string, string>, body });
    if (refuse) return new Response(refuse[1] + "\n", { status: refuse[0] });
    if (init.method === "POST") {
      const ref = create(MediaRefSchema, { mediaId: "ab".repeat(16), mime: sniff(body!), size: BigInt(body!.length),
        sha256: await sha(body!), owner: 1001n, name: "cat.png", signature: new Uint8Array(32).fill(7) });
      const answer = { ref: Buffer.from(toBinary(MediaRefSchema, ref)).toString("base64") };
      return new Response(JSON.stringify(answer), { status: 201 });
    }
    return new Response(new Uint8Array(stored), { status: 200 });
  }) as typeof fetch;
  return { fake, seen };
}

describe("qim-js media", () => {
  it("uploads with the bearer token, declared size, SHA-256 and sniffed type; progress to the end", async () => {
    const { fake, seen } = fakeService();
    const told: [number, number][] = [];
    const up = await upload("https://media:8443/", "tok", PNG, { name: "cat.png", progress: (s, t) => told.push([s, t]) },
      { fetch: fake });
    const h = seen[0].headers;
    expect(seen[0].url).toBe("https://media:8443/v1/media?name=cat.png");
    expect([h.Authorization, h["Content-Type"], h["X-QIM-Size"], h["X-QIM-SHA256"]])
      .toEqual(["Bearer tok", "image/png", "16", toHex(await sha(PNG))]);
    expect(seen[0].body).toEqual(PNG);
    expect(told[told.length - 1]).toEqual([16, 16]);
    expect([up.ref.mediaId, up.ref.mime, up.ref.size]).toEqual(["ab".repeat(16), "image/png", 16n]);
    expect(fromBinary(MediaRefSchema, up.body).name).toBe("cat.png");
  });

  it("a refusal is MediaRefused with the service's status and reason", async () => {
    const { fake } = fakeService([429, "daily media quota of 10 bytes exceeded"]);
    const err = await upload("https://m", "tok", PNG, {}, { fetch: fake }).catch((e) => e);
    expect(err).toBeInstanceOf(MediaRefused);
    expect([err.status, err.reason]).toEqual([429, "daily media quota of 10 bytes exceeded"]);
    const down = fakeService([410, "message recalled"]);
    const ref = create(MediaRefSchema, { mediaId: "cd".repeat(16), sha256: await sha(PNG) });
    await expect(fetchMedia("https://m", "t", ref, new Uint8Array(16), new Uint8Array(16), 0n, { fetch: down.fake }))
      .rejects.toMatchObject({ status: 410, reason: "message recalled" });
  });

  it("a download sends the token and the message, and checks the bytes against the reference", async () => {
    const { fake, seen } = fakeService();
    const ref = create(MediaRefSchema, { mediaId: "cd".repeat(16), mime: "image/png", sha256: await sha(PNG) });
    const conv = new Uint8Array(16).fill(3);
    const blob = await fetchMedia("https://m", "tok", ref, conv, new Uint8Array(16).fill(4), 1002n, { fetch: fake });
    expect(new Uint8Array(await blob.arrayBuffer())).toEqual(PNG);
    expect(blob.type).toBe("image/png");
    expect(seen[0].url).toBe(`https://m/v1/media/${"cd".repeat(16)}?conversation=${"03".repeat(16)}`
      + `&message=${"04".repeat(16)}&peer=1002`);
    expect(seen[0].headers.Authorization).toBe("Bearer tok");
    const other = fakeService(null, new Uint8Array([1, 2, 3]));
    await expect(fetchMedia("https://m", "tok", ref, conv, conv, 0n, { fetch: other.fake }))
      .rejects.toMatchObject({ status: 502 });
  });

  it("client.sendMedia sends the reference as a MEDIA message; download gets it back", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const c = await Client.open("ws://127.0.0.1:9301/qim", TOKEN, { dial: gw.dial });
    await c.connect();
    const conv = (await c.openDirect(1002n)).conversationId;
    await expect(c.sendMedia(conv, PNG)).rejects.toThrow(/mediaUrl/);
    const { fake } = fakeService();
    c.mediaUrl = "https://m";
    c.mediaHttp = { fetch: fake };
    await c.sendMedia(conv, new Blob([PNG]), { name: "cat.png" });
    expect(gw.sends.length).toBe(1);
    expect(gw.sends[0].messageType).toBe(MessageType.MEDIA);
    const ref = fromBinary(MediaRefSchema, gw.sends[0].body);
    expect([ref.mime, ref.size]).toEqual(["image/png", 16n]);
    const msg = (await c.messages(conv)).find((m) => m.messageType === MessageType.MEDIA)!;
    expect(new Uint8Array(await (await c.download(msg)).arrayBuffer())).toEqual(PNG);
    c.close();
  });

  it("sniffs like qim/wire/media.py and shows sizes in decimal units", () => {
    expect(sniff(new Uint8Array([0xff, 0xd8, 0xff, 0xe0]))).toBe("image/jpeg");
    expect(sniff(new Uint8Array([0x52, 0x49, 0x46, 0x46, 0, 0, 0, 0, 0x57, 0x45, 0x42, 0x50]))).toBe("image/webp");
    expect(sniff(new Uint8Array([0x25, 0x50, 0x44, 0x46, 0x2d]))).toBe("application/pdf");
    expect(sniff(new Uint8Array([1, 2]))).toBe("application/octet-stream");
    expect([humanSize(1_234_567), humanSize(3400), humanSize(12), humanSize(1024n)]).toEqual(
      ["1.2 MiB", "3.3 KiB", "12 B", "1.0 KiB"]);
  });
});
