import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { controlPreview, mediaWords } from "../src/app/notices";
import { Rows } from "../src/app/rows";
import { toHex } from "../src/sdk/bytes";
import type { StoredMessage } from "../src/sdk/model";
import { MediaRefSchema } from "../src/gen/qim/v1/media_pb";
import { ControlEventSchema } from "../src/gen/qim/v1/message_pb";

// What the page says for what is not plain text (H7's first hour: a direct chat's list
// read "(group change)" after a recall, and a photo showed its reference's bytes).
const control = (event: Record<string, unknown>) => toBinary(ControlEventSchema, create(ControlEventSchema, { event } as never));
const ref = (fields: Record<string, unknown>) => toBinary(MediaRefSchema, create(MediaRefSchema,
  { mediaId: "ab".repeat(16), sha256: new Uint8Array(32).fill(1), owner: 2n, signature: new Uint8Array(32), ...fields }));

describe("a notice in the list says what happened", () => {
  it("a recall, a delete and an edit are not a group change", () => {
    expect(controlPreview(control({ case: "stateChange", value: { messageId: new Uint8Array(16), state: 1 } })))
      .toBe("(a message was recalled)");
    expect(controlPreview(control({ case: "stateChange", value: { messageId: new Uint8Array(16), state: 2 } })))
      .toBe("(a message was deleted)");
    expect(controlPreview(control({ case: "edit", value: { messageId: new Uint8Array(16), version: 1 } })))
      .toBe("(a message was edited)");
  });
  it("a membership change and a garbled notice stay a group change", () => {
    expect(controlPreview(control({ case: "membership", value: { kind: 2, users: [5n] } }))).toBe("(group change)");
    expect(controlPreview(new Uint8Array([0xff, 0xff, 0xff]))).toBe("(group change)");
  });
});

describe("a MEDIA message in words, never its reference's bytes", () => {
  it("a photo, a voice note, a file", () => {
    expect(mediaWords(ref({ mime: "image/jpeg", size: 8229n, width: 800, height: 600, name: "photo.jpg",
      thumbnail: new TextEncoder().encode("RIFF....WEBPVP8 ") }))).toBe("[photo: photo.jpg, 800×600, 8.0 KiB]");
    expect(mediaWords(ref({ mime: "audio/ogg", size: 51200n, durationMs: 7000 }))).toBe("[voice note: 7 s, 50.0 KiB]");
    expect(mediaWords(ref({ mime: "application/pdf", size: BigInt(17 * 1024 * 1024), name: "合同.pdf" })))
      .toBe("[file: 合同.pdf, 17.0 MiB]");
  });
  it("an empty (cut) or garbled body", () => {
    expect(mediaWords(new Uint8Array())).toBe("[media]");
    expect(mediaWords(new Uint8Array([0xff, 0xff, 0xff]))).toBe("[media: unreadable reference]");
  });
  it("the chat row shows the words", () => {
    const conv = new Uint8Array(16).fill(1), mid = new Uint8Array(16).fill(9);
    const m: StoredMessage = { messageId: mid, conversationId: conv, conversationSeq: 5n, senderId: 2n, createdAtMs: 2n,
      messageType: 2, customType: new Uint8Array(), body: ref({ mime: "image/png", size: 2048n, width: 32, height: 32,
        name: "cat.png" }), clientMessageId: null, mailboxSeq: 1n, state: 0 } as StoredMessage;
    const rows = new Rows(toHex(conv), 1n);
    rows.message(m);
    expect(rows.list().map((r) => r.text)).toEqual(["[photo: cat.png, 32×32, 2.0 KiB]"]);
  });
});
