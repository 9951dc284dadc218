import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { fromUtf8, toHex, utf8 } from "../src/sdk/bytes";
import { Client, tokenClaims } from "../src/sdk/client";
import type { QimEvent } from "../src/sdk/events";
import { Banned } from "../src/sdk/errors";
import { KickReason } from "../src/sdk/protocol";
import { FakeGateway } from "./fakeserver";

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const token = (user: bigint, dev: bigint, name = "") =>
  `${b64({ alg: "EdDSA" })}.${b64({ sub: String(user), dev: String(dev), tenant: "0".repeat(32), name })}.sig`;
let port = 9000;
const FAST = { timing: { authTimeoutMs: 2000, ackDeadlineMs: 3000, probeMs: 4000 }, reconnectBackoffMs: [5, 20] as [number, number] };

async function client(gw: FakeGateway) {
  const c = await Client.open(`ws://127.0.0.1:${port++}/qim`, token(gw.userId, gw.deviceId), { ...FAST, dial: gw.dial });
  const events: QimEvent[] = [];
  c.on((e) => events.push(e));
  return { c, events };
}

const until = async (cond: () => boolean, ms = 3000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe("qim-js runtime against a fake gateway", () => {
  it("reads identity from the token claims as bigint", () => {
    const c = tokenClaims(token(9007199254740993n, 5n, "Ada"));
    expect([c.userId, c.deviceId, c.name]).toEqual([9007199254740993n, 5n, "Ada"]);
    expect(() => tokenClaims("a.b")).toThrow(RangeError);
  });

  it("a commit seen in the mailbox before the SEND_ACK resolves the send once", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c, events } = await client(gw);
    await c.connect();
    const conv = (await c.openDirect(1002n)).conversationId;
    gw.holdAcks = true;
    const sent = c.sendText(conv, "你好 👋");
    await until(() => gw.sends.length === 1);
    gw.push([]); // wake-up: the pull finds our own entry (with its cmid) before any ack
    await until(() => events.some((e) => e.type === "pendingResolved"));
    const ack = (await sent) as { conversationSeq: bigint; reconciled: boolean };
    expect([ack.conversationSeq, ack.reconciled]).toEqual([1n, true]);
    const msgs = await c.messages(conv);
    expect(msgs.map((m) => fromUtf8(m.body))).toEqual(["你好 👋"]);
    expect(events.filter((e) => e.type === "pendingResolved").length).toBe(1);
    expect(await c.unsent(conv)).toEqual([]);
  });

  it("refuses an empty or white-space text before storing or sending it", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c } = await client(gw);
    await c.connect();
    const conv = (await c.openDirect(1002n)).conversationId;
    for (const text of ["", " \u3000\n\t"]) {
      await expect(c.sendText(conv, text)).rejects.toThrow(/must not be empty or only white space/);
    }
    expect(gw.sends.length).toBe(0);
    expect(await c.unsent(conv)).toEqual([]);
    await c.sendText(conv, " ok ");  // text with white space around it is still text
    expect(gw.sends.length).toBe(1);
  });

  it("reconnects after a drop, reconciles the committed send and resends the other", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c, events } = await client(gw);
    await c.connect();
    const conv = (await c.openDirect(1002n)).conversationId;
    gw.dropAfterSend = true; // committed on the server, the ack lost with the link
    const first = c.sendText(conv, "first");
    await until(() => c.state === "reconnecting" || c.state === "ready" && gw.dials > 1);
    await first;
    expect(gw.sends.length).toBe(1); // found in the mailbox after the reconnect: never resent
    gw.refuseDial = true;
    c.runtime.abortConnection();
    const second = c.sendText(conv, "second", false) as Promise<Uint8Array>;
    const cmid = await second;
    await until(() => events.some((e) => e.type === "state" && e.state === "reconnecting"));
    gw.refuseDial = false;
    await until(() => c.state === "ready" && gw.sends.length === 2);
    expect(toHex(gw.sends[1].clientMessageId)).toBe(toHex(cmid)); // the same cmid
    await until(() => events.some((e) => e.type === "pendingResolved" && toHex(e.acks[0].clientMessageId) === toHex(cmid)));
    expect((await c.messages(conv)).map((m) => fromUtf8(m.body))).toEqual(["first", "second"]);
  });

  it("a push only wakes a pull: what reaches the store is the mailbox's copy", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c, events } = await client(gw);
    await c.connect();
    const conv = c.directId(1002n);
    const e = gw.deliver({ eventType: 1, messageId: new Uint8Array(16).fill(9), conversationId: conv,
      conversationSeq: 1n, senderId: 1002n, createdAtMs: 5n, messageType: 1, body: utf8("whole body") });
    gw.push([{ ...e, body: utf8("a reference") }]);
    await until(() => events.some((x) => x.type === "messagesAdded"));
    expect((await c.messages(conv)).map((m) => fromUtf8(m.body))).toEqual(["whole body"]);
    const entry = (await c.conversation(conv))!;
    expect([entry.unread, entry.peerUserId]).toEqual([1, 1002n]);
    gw.readSync(conv, 1n); // another tab of the user read it
    await until(() => events.some((x) => x.type === "readPosition" && x.source === "sync"));
    expect((await c.conversation(conv))!.unread).toBe(0);
  });

  it("CURSOR_EXPIRED runs REBUILD and restarts the cursor", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c, events } = await client(gw);
    const conv = c.directId(1002n);
    gw.deliver({ eventType: 1, messageId: new Uint8Array(16).fill(3), conversationId: conv, conversationSeq: 1n,
      senderId: 1002n, createdAtMs: 5n, messageType: 1, body: utf8("old") });
    await c.connect();
    gw.cursorFloor = 1n << 60n; // everything the device's cursor points at is trimmed
    gw.deliver({ eventType: 1, messageId: new Uint8Array(16).fill(4), conversationId: conv, conversationSeq: 2n,
      senderId: 1002n, createdAtMs: 6n, messageType: 1, body: utf8("new") });
    gw.push([]);
    await until(() => events.some((x) => x.type === "cursorReset"));
    gw.cursorFloor = 0n;
    await until(() => events.filter((x) => x.type === "messagesAdded").length >= 2);
    expect((await c.messages(conv)).map((m) => fromUtf8(m.body))).toEqual(["old", "new"]);
    expect(c.runtime.stats.rebuilds).toBe(1);
  });

  it("a restore's rewind: REBUILD drops the message the server lost and shows the one now at its seq", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c, events } = await client(gw);
    const conv = c.directId(1002n);
    const msg = (id: number, seq: bigint, body: string) => ({ eventType: 1, messageId: new Uint8Array(16).fill(id),
      conversationId: conv, conversationSeq: seq, senderId: 1002n, createdAtMs: 5n + seq, messageType: 1, body: utf8(body) });
    gw.deliver(msg(1, 1n, "m1"));
    gw.deliver(msg(2, 2n, "lost"));
    await c.connect();
    await until(() => events.some((x) => x.type === "messagesAdded"));
    c.runtime.abortConnection();
    gw.mailbox = gw.mailbox.slice(0, 1); // restored to before "lost": a new life (docs/decisions/0075)
    gw.mailbox[0].mailboxSeq = (2n << 48n) + 1n;
    gw.shardEpoch = 2n;
    gw.deliver(msg(3, 2n, "m3")); // its seq and its mailbox offset handed out again
    await until(() => events.some((x) => x.type === "cursorReset"));
    await until(() => events.some((x) => x.type === "messagesRemoved"));
    expect(events.flatMap((x) => (x.type === "messagesRemoved" ? x.messageIds.map(toHex) : [])))
      .toEqual([toHex(new Uint8Array(16).fill(2))]);
    expect((await c.messages(conv)).map((m) => [m.conversationSeq, fromUtf8(m.body)])).toEqual([[1n, "m1"], [2n, "m3"]]);
    expect(c.runtime.stats.rebuilds).toBe(1);
  });

  it("KICKED is terminal: state kicked, no reconnect by itself", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c, events } = await client(gw);
    await c.connect();
    gw.kick(KickReason.REPLACED);
    await until(() => c.state === "kicked");
    await new Promise((r) => setTimeout(r, 150));
    expect(gw.dials).toBe(1);
    expect(events.some((e) => e.type === "kicked" && e.reason === KickReason.REPLACED)).toBe(true);
    await expect(c.connect()).rejects.toThrow(/kicked/);
  });

  it("a ban is told as a ban: KICKED{BANNED} and ERROR BANNED stop with the reason and the end", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c, events } = await client(gw);
    await c.connect();
    const end = Date.UTC(2026, 11, 31);
    gw.kick(KickReason.BANNED, "广告 spam", BigInt(end));
    await until(() => c.state === "kicked");
    await new Promise((r) => setTimeout(r, 150));
    expect(gw.dials).toBe(1); // no reconnect
    expect(events.some((e) => e.type === "kicked" && e.reason === KickReason.BANNED && e.message === "广告 spam"
      && e.untilMs === end)).toBe(true);
    expect(events.some((e) => e.type === "state" && e.state === "kicked"
      && e.reason === "banned until 2026-12-31 00:00 UTC: 广告 spam")).toBe(true);
    const gw2 = new FakeGateway(1002n, 1n);
    gw2.banned = { words: "banned by a moderator: abuse", untilMs: 0n };
    const { c: c2, events: events2 } = await client(gw2);
    const refused = await c2.connect().then(() => null, (e: unknown) => e);
    expect(refused).toBeInstanceOf(Banned);
    expect([(refused as Banned).reason, (refused as Banned).untilMs]).toEqual(["abuse", 0]);
    expect(events2.some((e) => e.type === "state" && e.state === "offline" && e.reason === "banned by a moderator: abuse"))
      .toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(gw2.dials).toBe(1); // never retried
  });

  it("a refused token stops the reconnect: offline with the reason, waiting sends fail", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c, events } = await client(gw);
    await c.connect();
    const conv = (await c.openDirect(1002n)).conversationId;
    gw.refuseAuth = true;
    gw.refuseDial = false;
    c.runtime.abortConnection();
    const waiting = c.sendText(conv, "later");
    waiting.catch(() => undefined); // asserted below, after the state change
    await until(() => c.state === "offline");
    expect(events.some((e) => e.type === "state" && e.state === "offline" && e.reason === "token refused")).toBe(true);
    await expect(waiting).rejects.toThrow(/UNAUTHENTICATED/);
    const dials = gw.dials;
    await new Promise((r) => setTimeout(r, 100));
    expect(gw.dials).toBe(dials); // stopped, not retrying
    expect((await c.unsent(conv)).map((p) => p.state)).toEqual(["pending"]); // kept for a later connect
  });

  it("a burst above the rate limit: about one refusal per send, sent in submission order", async () => {
    const gw = new FakeGateway(1001n, 1n);
    const { c } = await client(gw);
    await c.connect();
    const conv = (await c.openDirect(1002n)).conversationId;
    gw.refillMs = 30;
    const texts = Array.from({ length: 8 }, (_, i) => `m${i}`);
    const acks = await Promise.all(texts.map((t) => c.sendText(conv, t)));
    expect(acks.map((a) => (a as { conversationSeq: bigint }).conversationSeq)).toEqual(texts.map((_, i) => BigInt(i + 1)));
    const admitted = gw.sends.filter((s, i) => gw.sends.findIndex((x) => toHex(x.clientMessageId) === toHex(s.clientMessageId)) === i);
    expect(admitted.map((s) => fromUtf8(s.body))).toEqual(texts); // first transmissions in submission order
    expect(gw.refused).toBeLessThanOrEqual(texts.length + 2); // no storm of refusals
    expect(c.runtime.gate.refusals).toBe(gw.refused);
  });
});
