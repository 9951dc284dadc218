// Pending media sends survive a reload (src/sdk/mediaoutbox.ts, mediasend.ts; issue 40): a
// send cut mid-upload (the page closed) is uploaded and sent by resumeMedia on the next
// Client of the same store, once; one cut after its MEDIA send was stored is only removed
// (no second message); a failure in front of the app removes its row; a final refusal
// at resume drops the row, a transient one keeps it.
import "fake-indexeddb/auto";
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MediaRefSchema } from "../src/gen/qim/v1/media_pb";
import { Client } from "../src/sdk/client";
import { MediaRefused, sniff } from "../src/sdk/media";
import { mediaRows, recordMedia, uploadedMedia } from "../src/sdk/mediaoutbox";
import { MessageType } from "../src/sdk/protocol";
import { FakeGateway } from "./fakeserver";

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const TOKEN = `${b64({ alg: "EdDSA" })}.${b64({ sub: "1001", dev: "1", tenant: "0".repeat(32) })}.sig`;
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4, 5, 6, 7, 8]);
let port = 9400;

/** A fake MediaService: every POST answers a reference, or `status` with a reason. */
function service(status = 201) {
  let posts = 0;
  const fetch = (async (_u: RequestInfo | URL, init: RequestInit = {}) => {
    if (init.method !== "POST") return new Response("", { status: 404 });
    posts += 1;
    if (status !== 201) return new Response("refused for the test\n", { status });
    const ref = create(MediaRefSchema, { mediaId: "ab".repeat(16), mime: sniff(PNG), size: BigInt(PNG.length),
      owner: 1001n, name: "cat.png", signature: new Uint8Array(32).fill(posts) });
    return new Response(JSON.stringify({ ref: Buffer.from(toBinary(MediaRefSchema, ref)).toString("base64") }),
      { status: 201 });
  }) as typeof globalThis.fetch;
  return { http: { fetch }, posts: () => posts };
}

async function open(gw: FakeGateway, url: string) {
  const c = await Client.open(url, TOKEN, { dial: gw.dial });
  await c.connect();
  c.mediaUrl = "https://m";
  return c;
}

describe("qim-js media outbox", () => {
  it("a send cut mid-upload is uploaded and sent once by the next start", async () => {
    const gw = new FakeGateway(1001n, 1n), url = `ws://127.0.0.1:${port++}/qim`;
    const first = await open(gw, url);
    const conv = (await first.openDirect(1002n)).conversationId;
    await recordMedia(first.store, { conversationId: conv, data: new Blob([PNG]), name: "cat.png", mime: "",
      keepMetadata: false }); // as sendMedia leaves it when the page closes during the upload
    first.close();
    const again = await open(gw, url), svc = service();
    again.mediaHttp = svc.http;
    const done = await again.resumeMedia();
    expect(done.map(([name, out]) => [name, out instanceof Uint8Array])).toEqual([["cat.png", true]]);
    expect([svc.posts(), gw.sends.length, gw.sends[0].messageType]).toEqual([1, 1, MessageType.MEDIA]);
    expect(await mediaRows(again.store)).toEqual([]);
    expect(await again.resumeMedia()).toEqual([]); // nothing twice
    expect(gw.sends.length).toBe(1);
    again.close();
  });

  it("a send cut after its MEDIA send was stored is removed, never sent twice", async () => {
    const gw = new FakeGateway(1001n, 1n), url = `ws://127.0.0.1:${port++}/qim`;
    const first = await open(gw, url), svc = service();
    first.mediaHttp = svc.http;
    const conv = (await first.openDirect(1002n)).conversationId;
    await first.sendMedia(conv, PNG, { name: "cat.png" }, false);
    const [sent] = gw.sends.length ? gw.sends : [null];
    const body = sent ? sent.body : (await first.unsent(conv))[0].body;
    // as if the page closed between the pending send and removing the row
    const id = await recordMedia(first.store, { conversationId: conv, data: PNG, name: "cat.png", mime: "",
      keepMetadata: false });
    await uploadedMedia(first.store, id, body);
    first.close();
    const again = await open(gw, url);
    again.mediaHttp = svc.http;
    expect(await again.resumeMedia()).toEqual([]);
    expect(await mediaRows(again.store)).toEqual([]);
    expect(svc.posts()).toBe(1);
    again.close();
  });

  it("a failure in front of the app removes its row; at resume a final refusal drops it, a transient one keeps it", async () => {
    const gw = new FakeGateway(1001n, 1n), url = `ws://127.0.0.1:${port++}/qim`;
    const c = await open(gw, url);
    const conv = (await c.openDirect(1002n)).conversationId;
    c.mediaHttp = service(415).http;
    await expect(c.sendMedia(conv, PNG, { name: "x.png" })).rejects.toBeInstanceOf(MediaRefused);
    expect(await mediaRows(c.store)).toEqual([]); // the app shows it (Retry records it again)
    for (const name of ["late.png", "bad.png"]) {
      await recordMedia(c.store, { conversationId: conv, data: PNG, name, mime: "", keepMetadata: false });
    }
    c.mediaHttp = service(503).http;
    const later = await c.resumeMedia();
    expect(later.map(([n, e]) => [n, (e as MediaRefused).status]).sort()).toEqual([["bad.png", 503], ["late.png", 503]]);
    expect((await mediaRows(c.store)).length).toBe(2); // kept for the next call
    c.mediaHttp = service(415).http;
    await c.resumeMedia();
    expect(await mediaRows(c.store)).toEqual([]); // the same bytes would be refused again: dropped
    expect(gw.sends.length).toBe(0);
    c.close();
  });
});
