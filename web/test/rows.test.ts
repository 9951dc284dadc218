import { describe, expect, it } from "vitest";
import { Rows } from "../src/app/rows";
import { toHex, utf8 } from "../src/sdk/bytes";
import type { PendingSend, StoredMessage } from "../src/sdk/model";
import { create, toBinary } from "@bufbuild/protobuf";
import { MediaRefSchema } from "../src/gen/qim/v1/media_pb";

const conv = new Uint8Array(16).fill(1);
const cmid = new Uint8Array(16).fill(7);
const mid = new Uint8Array(16).fill(9);
const pending: PendingSend = { clientMessageId: cmid, ordinal: 3n, conversationId: conv, recipientUserId: 2n,
  messageType: 1, customType: new Uint8Array(), body: utf8("你好 👋"), createdLocalMs: 1, state: "pending",
  messageId: null, conversationSeq: 0n, failure: "" };
const committed: StoredMessage = { messageId: mid, conversationId: conv, conversationSeq: 5n, senderId: 1n,
  createdAtMs: 2n, messageType: 1, customType: new Uint8Array(), body: utf8("你好 👋"), clientMessageId: cmid,
  mailboxSeq: 1n, state: 0 };
const ack = { clientMessageId: cmid, messageId: mid, conversationId: conv, conversationSeq: 5n, createdAtMs: 2n,
  reconciled: false };

describe("one row per send, never a ghost", () => {
  it("the commit event before the ack", () => {
    const r = new Rows(toHex(conv), 1n);
    r.pending(pending);
    r.message(committed);
    r.acked(ack);
    expect(r.list().map((x) => [x.key, x.state, x.seq])).toEqual([[toHex(cmid), "sent", 5n]]);
  });
  it("the ack before the commit event, and a late pending read-back", () => {
    const r = new Rows(toHex(conv), 1n);
    r.pending(pending);
    r.acked(ack);
    r.message(committed);
    r.pending(pending); // a stale copy of the pending row must not turn it back
    expect(r.list().map((x) => [x.state, x.text])).toEqual([["sent", "你好 👋"]]);
  });
  it("a recall keeps the row and drops the text", () => {
    const r = new Rows(toHex(conv), 1n);
    r.message(committed);
    r.message({ ...committed, state: 1, body: new Uint8Array() });
    expect(r.list().map((x) => [x.state, x.text])).toEqual([["recalled", ""]]);
  });
  it("pending rows after committed ones, failed stays with its reason", () => {
    const r = new Rows(toHex(conv), 1n);
    r.pending(pending);
    r.message({ ...committed, messageId: new Uint8Array(16).fill(4), clientMessageId: null, conversationSeq: 4n });
    r.failed(cmid, "PAYLOAD_TOO_LARGE");
    expect(r.list().map((x) => [x.state, x.failure])).toEqual([["sent", ""], ["failed", "PAYLOAD_TOO_LARGE"]]);
    expect(r.oldestSeq()).toBe(4n);
  });
  it("a MEDIA send is its words and its reference, pending and sent, never the reference's bytes as text", () => {
    const body = toBinary(MediaRefSchema, create(MediaRefSchema, { mediaId: "ab".repeat(16), mime: "image/jpeg",
      size: 8192n, width: 800, height: 600, name: "beach.jpg", thumbnail: new Uint8Array([1, 2, 3]) }));
    const r = new Rows(toHex(conv), 1n);
    r.pending({ ...pending, messageType: 2, body });
    expect(r.list().map((x) => [x.state, x.text, x.media])).toEqual([["pending", "[photo: beach.jpg, 800×600, 8.0 KiB]", body]]);
    r.message({ ...committed, messageType: 2, body });
    expect(r.list().map((x) => [x.state, x.text, x.media])).toEqual([["sent", "[photo: beach.jpg, 800×600, 8.0 KiB]", body]]);
    r.message(committed);
    expect(r.list()[0].media).toBeUndefined();
  });
});
