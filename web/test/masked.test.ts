// A send whose body the server's moderation replaced (docs/decisions/0126): the SEND_ACK
// says `replaced` with the committed body; qim-js resolves the send with them and its
// stored row (and the conversation's head) shows the committed body, not the sent one.
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { fromUtf8, utf8 } from "../src/sdk/bytes";
import { Client } from "../src/sdk/client";
import type { QimEvent, SendAck } from "../src/sdk/events";
import { FakeGateway } from "./fakeserver";

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const token = (user: bigint, dev: bigint) =>
  `${b64({ alg: "EdDSA" })}.${b64({ sub: String(user), dev: String(dev), tenant: "0".repeat(32), name: "" })}.sig`;
const FAST = { timing: { authTimeoutMs: 2000, ackDeadlineMs: 3000, probeMs: 4000 }, reconnectBackoffMs: [5, 20] as [number, number] };

describe("a body replaced by moderation", () => {
  it("resolves the send as replaced and stores the committed body", async () => {
    const gw = new FakeGateway(1001n, 1n);
    gw.mask = (body) => (fromUtf8(body).includes("darn") ? utf8(fromUtf8(body).replaceAll("darn", "****")) : null);
    const c = await Client.open("ws://127.0.0.1:9400/qim", token(gw.userId, gw.deviceId), { ...FAST, dial: gw.dial });
    const events: QimEvent[] = [];
    c.on((e) => events.push(e));
    await c.connect();
    const conv = (await c.openDirect(1002n)).conversationId;
    const plain = (await c.sendText(conv, "hello")) as SendAck;
    expect(plain.replaced ?? false).toBe(false);
    const ack = (await c.sendText(conv, "oh darn it")) as SendAck;
    expect([ack.replaced, fromUtf8(ack.body!)]).toEqual([true, "oh **** it"]);
    const resolved = events.flatMap((e) => (e.type === "pendingResolved" ? e.acks : []));
    expect(resolved.map((a) => a.replaced ?? false)).toEqual([false, true]);
    // the stored copy is the committed one, before and after the mailbox brings it
    const bodies = async () => (await c.messages(conv)).map((m) => fromUtf8(m.body));
    expect(await bodies()).toEqual(["hello", "oh **** it"]);
    expect(fromUtf8((await c.conversation(conv))!.lastMessage!.body)).toBe("oh **** it");
    gw.push([]);
    await new Promise((r) => setTimeout(r, 100));
    expect(await bodies()).toEqual(["hello", "oh **** it"]);
    await c.close();
  });
});
