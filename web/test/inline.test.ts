/**
 * Inline pushes in qim-js (issue 41, docs/decisions/0156; web/src/sdk/puller.ts): a
 * PUSH_EVENTS with inline_entries is applied as a MAILBOX_BATCH page to mailbox_seq,
 * without a pull, only when no flight runs and the store's committed cursor is on its
 * lane and shard_epoch at exactly prev_mailbox_seq; anything else pulls as before (a
 * covered position: nothing). Against the fake gateway, which counts pulls.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { fromUtf8, utf8 } from "../src/sdk/bytes";
import { Client } from "../src/sdk/client";
import type { QimEvent } from "../src/sdk/events";
import { FakeGateway } from "./fakeserver";

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const token = (user: bigint, dev: bigint) =>
  `${b64({ alg: "EdDSA" })}.${b64({ sub: String(user), dev: String(dev), tenant: "0".repeat(32) })}.sig`;
let port = 9700;
const FAST = { timing: { authTimeoutMs: 2000, ackDeadlineMs: 3000, probeMs: 4000 }, reconnectBackoffMs: [5, 20] as [number, number] };
const PEER = 1002n;

const until = async (cond: () => boolean, ms = 3000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
};
const settle = () => new Promise((r) => setTimeout(r, 40)); // long enough for a pull the fake answers at once

/** A synced client of user 1001 against a fresh fake; `n` counts its messagesAdded events. */
async function synced() {
  const gw = new FakeGateway(1001n, 1n);
  const c = await Client.open(`ws://127.0.0.1:${port++}/qim`, token(gw.userId, gw.deviceId), { ...FAST, dial: gw.dial });
  const events: QimEvent[] = [];
  c.on((e) => events.push(e));
  await c.connect();
  const conv = c.directId(PEER);
  let k = 0;
  /** The peer's next message, in the fake's mailbox (not pushed). */
  const incoming = (text: string) => {
    k++;
    return gw.deliver({ eventType: 1, messageId: new Uint8Array(16).fill(k), conversationId: conv,
      conversationSeq: BigInt(k), senderId: PEER, createdAtMs: 1000n + BigInt(k), messageType: 1, body: utf8(text) });
  };
  const added = () => events.filter((e) => e.type === "messagesAdded").length;
  const texts = async () => (await c.messages(conv)).map((m) => fromUtf8(m.body));
  /** No flight runs (the puller's private single flight, read for the test only). */
  const idle = () => (c.runtime.puller as unknown as { running: unknown }).running === null;
  return { gw, c, events, conv, incoming, added, texts, idle };
}

describe("qim-js inline pushes (decision 0156)", () => {
  it("cursor == prev: applied as a page, told as one, no pull; the cursor moves to mailbox_seq", async () => {
    const { gw, c, incoming, added, texts, conv } = await synced();
    const pulls = gw.pulls;
    const e1 = incoming("first");
    gw.pushAt(e1.mailboxSeq, { prev: 0n, entries: [e1] }); // the user's first entry on the lane
    await until(() => added() === 1);
    const e2 = incoming("second");
    gw.pushAt(e2.mailboxSeq, { prev: e1.mailboxSeq, entries: [e2] });
    await until(() => added() === 2);
    await settle();
    expect(gw.pulls).toBe(pulls);
    expect(c.runtime.stats.pushesApplied).toBe(2);
    expect(await texts()).toEqual(["first", "second"]);
    expect((await c.runtime.store.cursor())!.seq).toBe(e2.mailboxSeq);
    expect((await c.conversation(conv))!.unread).toBe(2);
  });

  it("the user's own entry inline resolves its pending send, as a pulled one does", async () => {
    const { gw, c, events, conv } = await synced();
    await c.openDirect(PEER);
    gw.holdAcks = true;
    const sent = c.sendText(conv, "mine");
    await until(() => gw.mailbox.length === 1);
    const pulls = gw.pulls;
    gw.pushAt(gw.mailbox[0].mailboxSeq, { prev: 0n, entries: [gw.mailbox[0]] });
    const ack = (await sent) as { conversationSeq: bigint; reconciled: boolean };
    expect([ack.conversationSeq, ack.reconciled]).toEqual([1n, true]);
    expect(events.filter((e) => e.type === "pendingResolved").length).toBe(1);
    expect(gw.pulls).toBe(pulls);
    expect(c.runtime.stats.pushesApplied).toBe(1);
    expect(await c.unsent(conv)).toEqual([]);
  });

  it("cursor != prev (a push lost before it): never applied past the gap, a pull brings both in order", async () => {
    const { gw, c, incoming, texts, idle } = await synced();
    const pulls = gw.pulls;
    const e1 = incoming("lost push");
    const e2 = incoming("after the gap");
    gw.pushAt(e2.mailboxSeq, { prev: e1.mailboxSeq, entries: [e2] });
    await until(() => gw.pulls === pulls + 1);
    await until(() => c.runtime.stats.pushes === 1 && idle());
    expect(await texts()).toEqual(["lost push", "after the gap"]);
    expect(c.runtime.stats.pushesApplied).toBe(0);
    const e3 = incoming("back in step");
    gw.pushAt(e3.mailboxSeq, { prev: e2.mailboxSeq, entries: [e3] }); // the cursor is e2 now
    await until(() => c.runtime.stats.pushesApplied === 1);
    await settle();
    expect(gw.pulls).toBe(pulls + 1);
    expect(await texts()).toEqual(["lost push", "after the gap", "back in step"]);
  });

  it("a pull in flight: no apply beside it; a push that waited is checked against the cursor the pull committed", async () => {
    const { gw, c, incoming, added, texts, idle } = await synced();
    const e1 = incoming("one");
    gw.holdPulls = true;
    const pulls = gw.pulls;
    c.runtime.puller.wake(); // a pull from cursor 0 (its page: e1), held by the fake
    await until(() => gw.pulls === pulls + 1);
    gw.pushAt(e1.mailboxSeq, { prev: 0n, entries: [e1] }); // cursor == prev, but a pull is in flight
    const e2 = incoming("two");
    gw.pushAt(e2.mailboxSeq, { prev: e1.mailboxSeq, entries: [e2] }); // follows what the held page brings
    await settle();
    expect([c.runtime.stats.pushesApplied, added()]).toEqual([0, 0]);
    gw.releasePulls();
    await until(() => idle() && c.runtime.stats.pushesApplied === 1);
    expect((await c.runtime.store.cursor())!.seq).toBe(e2.mailboxSeq);
    expect(await texts()).toEqual(["one", "two"]);
    expect([gw.pulls, c.runtime.stats.pushesSkipped]).toEqual([pulls + 1, 1]); // e1 came with the page
    const e3 = incoming("three");
    gw.pushAt(e3.mailboxSeq, { prev: e2.mailboxSeq, entries: [e3] });
    await until(() => added() === 3);
    await settle();
    expect([c.runtime.stats.pushesApplied, gw.pulls]).toEqual([2, pulls + 1]);
  });

  it("a burst: pushes arriving while one is applied wait their turn and are applied in order, no pull", async () => {
    const { gw, c, incoming, texts, idle } = await synced();
    const pulls = gw.pulls;
    let prev = 0n;
    const sent: string[] = [];
    for (let i = 0; i < 20; i++) {
      const e = incoming(`burst ${i}`);
      gw.pushAt(e.mailboxSeq, { prev, entries: [e] });
      prev = e.mailboxSeq;
      sent.push(`burst ${i}`);
    }
    await until(() => c.runtime.stats.pushesApplied === 20 && idle());
    expect(await texts()).toEqual(sent);
    expect(gw.pulls).toBe(pulls);
  });

  it("another lane, mailbox_seq 0, no inline entries: pulled as before, never applied", async () => {
    const { gw, c, incoming, texts, idle } = await synced();
    let pulls = gw.pulls;
    let prev = 0n;
    const cases: [string, (e: ReturnType<typeof incoming>) => void][] = [
      ["another lane", (e) => gw.pushAt(e.mailboxSeq, { prev, entries: [e] }, 4)],
      ["mailbox_seq 0", (e) => gw.pushAt(0n, { prev, entries: [e] })],
      ["a position only", (e) => gw.pushAt(e.mailboxSeq)],
    ];
    for (const [what, push] of cases) {
      const e = incoming(what);
      push(e);
      await until(() => gw.pulls === pulls + 1);
      await until(() => idle());
      pulls = gw.pulls;
      prev = e.mailboxSeq;
    }
    expect(await texts()).toEqual(cases.map(([what]) => what));
    expect(c.runtime.stats.pushesApplied).toBe(0);
    const e = incoming("inline");
    gw.pushAt(e.mailboxSeq, { prev, entries: [e] });
    await until(() => c.runtime.stats.pushesApplied === 1);
    await settle();
    expect(gw.pulls).toBe(pulls);
  });

  it("an inline text without its body (a referenced one) is never applied: the pull brings it whole", async () => {
    const { gw, c, incoming, texts, idle } = await synced();
    const pulls = gw.pulls;
    const e1 = incoming("the whole body");
    gw.pushAt(e1.mailboxSeq, { prev: 0n, entries: [{ ...e1, body: new Uint8Array(0) }] });
    await until(() => gw.pulls === pulls + 1 && idle());
    expect(await texts()).toEqual(["the whole body"]);
    expect(c.runtime.stats.pushesApplied).toBe(0);
    const e2 = incoming("inline");
    gw.pushAt(e2.mailboxSeq, { prev: e1.mailboxSeq, entries: [e2] });
    await until(() => c.runtime.stats.pushesApplied === 1);
    expect(await texts()).toEqual(["the whole body", "inline"]);
    expect(gw.pulls).toBe(pulls + 1);
  });

  it("another shard_epoch at the same offset (a restore): never applied, the pull's CURSOR_EXPIRED rebuilds", async () => {
    const { gw, c, events, incoming, texts, idle } = await synced();
    const e1 = incoming("before the restore");
    gw.pushAt(e1.mailboxSeq, { prev: 0n, entries: [e1] });
    await until(() => c.runtime.stats.pushesApplied === 1);
    gw.shardEpoch = 2n; // a new life of the shard: offsets kept, the old entries keep their seqs
    const e2 = incoming("after the restore");
    gw.pushAt(e2.mailboxSeq, { prev: e1.mailboxSeq, entries: [e2] });
    await until(() => events.some((x) => x.type === "cursorReset"));
    await until(() => idle());
    expect(c.runtime.stats.pushesApplied).toBe(1);
    expect(c.runtime.stats.rebuilds).toBe(1);
    expect(await texts()).toEqual(["before the restore", "after the restore"]);
  });

  it("a push at or below the cursor: nothing (no pull, no apply, nothing told)", async () => {
    const { gw, c, incoming, added, idle } = await synced();
    const e1 = incoming("pulled");
    c.runtime.puller.wake();
    await until(() => added() === 1);
    await until(() => idle());
    const pulls = gw.pulls;
    gw.pushAt(e1.mailboxSeq, { prev: 0n, entries: [e1] });
    await settle();
    expect([gw.pulls, added(), c.runtime.stats.pushesSkipped, c.runtime.stats.pushesApplied]).toEqual([pulls, 1, 1, 0]);
    const e2 = incoming("next");
    gw.pushAt(e2.mailboxSeq, { prev: e1.mailboxSeq, entries: [e2] });
    await until(() => added() === 2);
    expect([gw.pulls, c.runtime.stats.pushesApplied]).toEqual([pulls, 1]);
  });
});
