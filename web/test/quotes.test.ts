import "fake-indexeddb/auto";
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MailboxEntrySchema } from "../src/gen/qim/v1/mailbox_pb";
import { ControlEventSchema, ReplyRefSchema } from "../src/gen/qim/v1/message_pb";
import { utf8 } from "../src/sdk/bytes";
import { conversationIdDirect } from "../src/sdk/ids";
import { LocalStore } from "../src/sdk/store";
import { markState } from "../src/sdk/storeops";
import { openQimDb } from "../src/sdk/storedb";

let n = 0;
const EP = () => `ws://127.0.0.1:${7600 + n++}/qim`;
const mid = (i: number) => new Uint8Array(16).fill(i);
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const conv = conversationIdDirect(0n, 7n, 9n);

function entry(seq: number, cseq: number, sender: bigint, extra: object = {}) {
  return create(MailboxEntrySchema, { mailboxSeq: BigInt(seq), eventType: 1, messageId: mid(seq), conversationId: conv,
    conversationSeq: BigInt(cseq), senderId: sender, createdAtMs: 1000n + BigInt(seq), messageType: 1,
    body: utf8(`m${seq}`), ...extra });
}
const replyTo = (target: number, preview: string) => ({ reply: create(ReplyRefSchema, { messageId: mid(target),
  conversationSeq: BigInt(target), senderId: 9n, messageType: 1, state: 0, preview }) });
const notice = (target: number, state: number) => ({ eventType: state === 1 ? 2 : 4, messageType: 4,
  body: toBinary(ControlEventSchema, create(ControlEventSchema, { event: { case: "stateChange",
    value: { messageId: mid(target), state, conversationSeq: BigInt(target) } } })) });
const quotes = async (s: LocalStore) => (await s.messages(conv)).filter((m) => m.reply).map((m) =>
  [Number(m.conversationSeq), m.reply!.state, m.reply!.preview]);

describe("quotes of a removed message (decision 0134, qim-js)", () => {
  it("a recall notice clears the stored replies' quotes and tells the app", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    await s.applyMailboxBatch([entry(1, 1, 9n), entry(2, 2, 7n, replyTo(1, "m1")), entry(3, 3, 9n, replyTo(1, "m1")),
      entry(4, 4, 7n, replyTo(3, "m3"))], 4n, 0, 1);
    const res = await s.applyMailboxBatch([entry(5, 5, 9n, notice(1, 1))], 5n, 0, 1);
    expect(res.updated.map((m) => Number(m.conversationSeq)).sort()).toEqual([1, 2, 3]);
    expect(await quotes(s)).toEqual([[2, 1, ""], [3, 1, ""], [4, 0, "m3"]]); // a quote of a message still there stays
    s.close();
  });

  it("a notice of a target never stored here still clears, and a reply stored after comes without text", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    await s.applyMailboxBatch([entry(2, 2, 9n, replyTo(1, "secret"))], 2n, 0, 1); // the target is older than the store
    await s.applyMailboxBatch([entry(3, 3, 9n, notice(1, 2))], 3n, 0, 1); // deleted by an operator
    expect(await quotes(s)).toEqual([[2, 2, ""]]);
    await s.applyMailboxBatch([entry(4, 4, 9n), entry(5, 5, 9n, notice(4, 1)), entry(6, 6, 7n, replyTo(4, "m4"))],
      6n, 0, 1);
    expect(await quotes(s)).toEqual([[2, 2, ""], [6, 1, ""]]); // stored while its target is recalled
    s.close();
  });

  it("our own recall clears the quotes at once", async () => {
    const s = await LocalStore.open(EP(), 0n, 7n, 1n);
    await s.applyMailboxBatch([entry(1, 1, 7n), entry(2, 2, 9n, replyTo(1, "m1"))], 2n, 0, 1);
    const res = await markState(s, mid(1), 1);
    expect(res.updated.map((m) => Number(m.conversationSeq))).toEqual([1, 2]);
    expect(await quotes(s)).toEqual([[2, 1, ""]]);
    s.close();
  });

  it("a database of schema 1 gets the index filled from its stored replies", async () => {
    const ep = EP();
    const s = await LocalStore.open(ep, 0n, 7n, 1n);
    await s.applyMailboxBatch([entry(1, 1, 9n), entry(2, 2, 9n, replyTo(1, "m1"))], 2n, 0, 1);
    const name = s.name;
    s.close();
    // as qim-js of schema 1 left it: no index key on the row, no index
    const db = await openQimDb(name);
    const row = (await db.get("messages", hex(mid(2))))!;
    delete row.replyTarget; // as qim-js of schema 1 stored it: no index key on the row
    db.close();
    await new Promise<void>((ok, bad) => { // a database of version 1: no byReplyTarget index
      const del = indexedDB.deleteDatabase(name);
      del.onsuccess = () => ok();
      del.onerror = () => bad(del.error);
    });
    const v1 = await new Promise<IDBDatabase>((ok, bad) => {
      const req = indexedDB.open(name, 1);
      req.onupgradeneeded = () => {
        const d = req.result;
        for (const st of ["meta", "cursor", "conversations"]) d.createObjectStore(st, st === "conversations" ? { keyPath: "id" } : undefined);
        d.createObjectStore("messages", { keyPath: "id" }).createIndex("byConv", ["conv", "seqKey"]);
        d.createObjectStore("pending", { keyPath: "id" }).createIndex("byOrdinal", "ordinalKey");
        d.createObjectStore("ops", { keyPath: ["kind", "key"] });
        req.transaction!.objectStore("messages").put(row);
      };
      req.onsuccess = () => ok(req.result);
      req.onerror = () => bad(req.error);
    });
    v1.close();
    const upgraded = await openQimDb(name);
    const found = await upgraded.getAllFromIndex("messages", "byReplyTarget",
      hex(mid(1)));
    expect(found.map((r) => Number(r.conversationSeq))).toEqual([2]);
    upgraded.close();
  });
});
