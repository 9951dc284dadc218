import "fake-indexeddb/auto";
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MailboxEntrySchema } from "../src/gen/qim/v1/mailbox_pb";
import { ControlEventSchema, MembershipChange_Kind } from "../src/gen/qim/v1/message_pb";
import { SessionEntrySchema } from "../src/gen/qim/v1/session_pb";
import { toHex, utf8 } from "../src/sdk/bytes";
import { StoreError } from "../src/sdk/errors";
import { clientMessageId, conversationIdDirect, conversationIdGroup } from "../src/sdk/ids";
import { LocalStore } from "../src/sdk/store";

const U64 = (1n << 64n) - 1n;
let n = 0;
const EP = () => `ws://127.0.0.1:${7000 + n++}/qim`;
const mid = (i: number) => new Uint8Array(16).fill(i);

function entry(seq: number, conv: Uint8Array, cseq: number, sender: bigint, extra: object = {}) {
  return create(MailboxEntrySchema, { mailboxSeq: BigInt(seq), eventType: 1, messageId: mid(seq), conversationId: conv,
    conversationSeq: BigInt(cseq), senderId: sender, createdAtMs: 1000n + BigInt(seq), messageType: 1,
    body: utf8(`m${seq}`), ...extra });
}

describe("LocalStore (IndexedDB)", () => {
  it("reserves cmids from the store nonce and ordinal, kept across reopen", async () => {
    const ep = EP();
    const s = await LocalStore.open(ep, 0n, 7n, U64);
    const conv = conversationIdDirect(0n, 7n, 8n);
    const a = await s.addPending(conv, 8n, 1, new Uint8Array(), utf8("你好 👋"));
    expect(toHex(a.clientMessageId)).toBe(toHex(clientMessageId(s.meta.nonce, U64, 0n)));
    s.close();
    const again = await LocalStore.open(ep, 0n, 7n, U64);
    const b = await again.addPending(conv, 8n, 1, new Uint8Array(), utf8("second"));
    expect(b.ordinal).toBe(1n);
    const pend = await again.pendingSends();
    expect(pend.map((p) => new TextDecoder().decode(p.body))).toEqual(["你好 👋", "second"]);
    expect(pend[0].recipientUserId).toBe(8n);
    const other = await LocalStore.open(ep, 1n, 7n, U64); // another tenant: a database of its own
    expect(other.name).not.toBe(again.name);
    expect(await other.pendingSends()).toEqual([]);
    other.close();
    again.close();
  });

  it("applies a batch with its cursor in one transaction; own entries resolve pending", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    const conv = conversationIdDirect(0n, 7n, U64);
    const p = await s.addPending(conv, U64, 1, new Uint8Array(), utf8("mine"));
    const res = await s.applyMailboxBatch([
      entry(1, conv, 1, U64), entry(2, conv, 2, U64),
      entry(3, conv, 3, 7n, { clientMessageId: p.clientMessageId, body: utf8("mine") }),
      entry(4, conv, 4, U64),
    ], 4n, 5, 1);
    expect(res.resolved.map((r) => toHex(r.clientMessageId))).toEqual([toHex(p.clientMessageId)]);
    expect((await s.pendingSends(["committed"])).length).toBe(1);
    const c = (await s.conversation(conv))!;
    expect(c.peerUserId).toBe(U64);
    expect([c.unread, c.unreadExact, c.readConversationSeq]).toEqual([1, true, 3n]); // own message read up to 3
    expect((await s.cursor())!.seq).toBe(4n);
    // a batch that would move the cursor back is refused whole
    await expect(s.applyMailboxBatch([entry(9, conv, 9, U64)], 2n, 5, 1)).rejects.toThrow(StoreError);
    expect((await s.messages(conv)).map((m) => m.conversationSeq)).toEqual([1n, 2n, 3n, 4n]);
    expect((await s.cursor())!.seq).toBe(4n);
  });

  it("a recall notice clears the body and the unread count", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    const conv = conversationIdDirect(0n, 7n, 9n);
    await s.applyMailboxBatch([entry(1, conv, 1, 9n)], 1n, 0, 1);
    expect((await s.conversation(conv))!.unread).toBe(1);
    const notice = toBinary(ControlEventSchema, create(ControlEventSchema, { event: { case: "stateChange",
      value: { messageId: mid(1), state: 1, conversationSeq: 1n } } }));
    const res = await s.applyMailboxBatch([entry(2, conv, 2, 9n, { eventType: 2, messageType: 4, body: notice })],
      2n, 0, 1);
    expect(res.updated.map((m) => [m.state, m.body.length])).toEqual([[1, 0]]);
    expect((await s.conversation(conv))!.unread).toBe(0);
    const [m] = await s.messages(conv);
    expect([m.state, m.body.length]).toEqual([1, 0]);
  });

  it("counts a group's unread only inside the member interval and pages back", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    const conv = conversationIdGroup(0n, 42n);
    const joined = toBinary(ControlEventSchema, create(ControlEventSchema, { event: { case: "membership",
      value: { kind: MembershipChange_Kind.JOINED, users: [7n], groupId: 42n, actorUserId: 5n } } }));
    await s.applyMailboxBatch([entry(1, conv, 1, 5n), entry(2, conv, 2, 5n)], 2n, 0, 1);
    await s.applyMailboxBatch([entry(3, conv, 3, 5n, { eventType: 3, messageType: 4, body: joined }),
      entry(4, conv, 4, 5n), entry(5, conv, 5, 5n)], 5n, 0, 1);
    const c = (await s.conversation(conv))!;
    expect([c.groupId, c.joinedAt, c.unread]).toEqual([42n, 2n, 2]); // seq 1 and 2 are before the join
    expect((await s.messages(conv, 5n, 2)).map((m) => m.conversationSeq)).toEqual([2n, 4n]);
    await s.moveRead(conv, 4n, false);
    expect((await s.conversation(conv))!.unread).toBe(1);
    expect((await s.unconfirmedReads()).map(([, seq]) => seq)).toEqual([4n]);
  });

  it("takes the server's snapshot until the store holds every counted message", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    const conv = conversationIdDirect(0n, 7n, 9n);
    const head = { messageId: mid(30), conversationSeq: 30n, senderId: 9n, messageType: 1, body: utf8("x"),
      bodyIncluded: true };
    await s.applySessions([create(SessionEntrySchema, { conversationId: conv, kind: 1, peerUserId: 9n,
      readConversationSeq: 20n, unread: 10, unreadExact: true, lastMessage: head })]);
    let c = (await s.conversation(conv))!;
    expect([c.unread, c.unreadExact]).toEqual([10, true]);
    await s.applyMailboxBatch([entry(31, conv, 31, 9n)], 31n, 0, 1);
    c = (await s.conversation(conv))!;
    expect([c.unread, c.unreadExact]).toEqual([11, true]);
    await s.moveRead(conv, 25n, false); // the server's count no longer applies: a lower bound
    c = (await s.conversation(conv))!;
    expect([c.unread, c.unreadExact]).toEqual([1, false]);
  });
});

describe("LocalStore list edge cases", () => {
  it("a server snapshot whose head is at or below its read position counts nothing", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    const conv = conversationIdDirect(0n, 7n, 9n);
    const head = { messageId: mid(3), conversationSeq: 3n, senderId: 7n, messageType: 1, body: utf8("mine"),
      bodyIncluded: true };
    await s.applySessions([create(SessionEntrySchema, { conversationId: conv, kind: 1, peerUserId: 9n,
      readConversationSeq: 3n, unread: 0, unreadExact: true, lastMessage: head })]);
    const c = (await s.conversation(conv))!;
    expect([c.unread, c.unreadExact, c.readConversationSeq]).toEqual([0, true, 3n]);
  });
});

describe("group titles", () => {
  it("from the session list, the CREATED notice and a rename", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    const conv = conversationIdGroup(0n, 77n);
    const created = toBinary(ControlEventSchema, create(ControlEventSchema, { event: { case: "membership",
      value: { kind: MembershipChange_Kind.CREATED, users: [5n, 7n], groupId: 77n, actorUserId: 5n, title: "家人 🏠" } } }));
    await s.applyMailboxBatch([entry(1, conv, 1, 5n, { eventType: 3, messageType: 4, body: created })], 1n, 0, 1);
    expect((await s.conversation(conv))!.title).toBe("家人 🏠");
    const renamed = toBinary(ControlEventSchema, create(ControlEventSchema, { event: { case: "titleChange",
      value: { groupId: 77n, title: "Family", actorUserId: 5n } } }));
    await s.applyMailboxBatch([entry(2, conv, 2, 5n, { eventType: 3, messageType: 4, body: renamed })], 2n, 0, 1);
    const c = (await s.conversation(conv))!;
    expect([c.title, c.unread]).toEqual(["Family", 0]); // a CONTROL notice is never unread
    await s.applySessions([create(SessionEntrySchema, { conversationId: conv, kind: 2, groupId: 77n, groupTitle: "" })]);
    expect((await s.conversation(conv))!.title).toBe(""); // absolute: the title was removed
  });
});
