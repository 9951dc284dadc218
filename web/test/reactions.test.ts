// qim-js reactions and typing without a network (src/sdk/reactions.ts; the rules of
// qim/sdk/reactions.py, decision 0121): the reply's summary and `mine`, live events with
// `mine` learnt from this user's other devices, a bad emoji refused before any request,
// the SDK's own 2 s typing limit, a typing indication that expires by itself and one that
// a message from the typist ends at once.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it, vi } from "vitest";
import { ErrorCode } from "../src/gen/qim/v1/common_pb";
import {
  ReactionCountSchema, ReactionEventsSchema, ReactOkSchema, ReactSchema, TypingEventsSchema, TypingOkSchema,
} from "../src/gen/qim/v1/reaction_pb";
import { HistoryBatchSchema } from "../src/gen/qim/v1/history_pb";
import { MailboxEntrySchema } from "../src/gen/qim/v1/mailbox_pb";
import type { QimEvent } from "../src/sdk/events";
import { toHex } from "../src/sdk/bytes";
import { EventType, Op } from "../src/sdk/protocol";
import { Reactions, type ReactionHost } from "../src/sdk/reactions";

const ME = 7n;
const CONV = new Uint8Array(16).fill(2);
const MSG = new Uint8Array(16).fill(9);

function host(reply: (opcode: number, body: Uint8Array) => Uint8Array) {
  const told: QimEvent[] = [];
  const sent: { opcode: number; body: Uint8Array }[] = [];
  const h: ReactionHost = {
    request: async (opcode, body) => { sent.push({ opcode, body }); return { opcode: opcode + 1, body: reply(opcode, body) }; },
    emit: (e) => told.push(e), frameHandlers: new Map(), pulledHandlers: [],
  };
  return { h, told, sent };
}
const count = (emoji: string, n: number, mine = false) => create(ReactionCountSchema, { emoji, count: n, mine });

describe("qim-js reactions", () => {
  it("adds with the summary, tells live changes with mine, refuses a bad emoji locally", async () => {
    const { h, told, sent } = host(() => toBinary(ReactOkSchema, create(ReactOkSchema, {
      summary: { counts: [count("👍", 2, true)] }, changed: true })));
    const r = new Reactions(h, ME, async () => 5n);
    expect(await r.add(CONV, MSG, "👍")).toEqual([{ emoji: "👍", count: 2, mine: true }]);
    const req = fromBinary(ReactSchema, sent[0].body);
    expect([sent[0].opcode, req.emoji, req.remove, req.peerUserId]).toEqual([Op.REACT, "👍", false, 5n]);
    await expect(r.add(CONV, MSG, "two words")).rejects.toMatchObject({ code: ErrorCode.INVALID_ARGUMENT });
    expect(sent.length).toBe(1);

    const frame = (userId: bigint, emoji: string, removed: boolean, counts: ReturnType<typeof count>[]) =>
      h.frameHandlers.get(Op.REACTION_EVENTS)!(toBinary(ReactionEventsSchema, create(ReactionEventsSchema, {
        conversationId: CONV, messageId: MSG, userId, emoji, removed, counts })));
    frame(8n, "🎉", false, [count("👍", 2), count("🎉", 1)]); // another user
    frame(ME, "🎉", false, [count("👍", 2), count("🎉", 2)]); // this user on another device
    frame(ME, "👍", true, [count("🎉", 2), count("👍", 1)]);
    const summaries = told.flatMap((e) => (e.type === "reactions" ? [e.summary] : []));
    expect(summaries).toEqual([
      [{ emoji: "👍", count: 2, mine: true }, { emoji: "🎉", count: 1, mine: false }],
      [{ emoji: "👍", count: 2, mine: true }, { emoji: "🎉", count: 2, mine: true }],
      [{ emoji: "🎉", count: 2, mine: true }, { emoji: "👍", count: 1, mine: false }],
    ]);
  });

  it("learns the summaries a mailbox pull carries, with mine, and nothing for an entry without", () => {
    const { h, sent } = host(() => new Uint8Array());
    const r = new Reactions(h, ME, async () => 0n);
    const other = new Uint8Array(16).fill(3);
    expect(h.pulledHandlers.length).toBe(1);
    h.pulledHandlers[0]([
      create(MailboxEntrySchema, { messageId: MSG, reactions: { counts: [count("👍", 2, true), count("❤️", 1)] } }),
      create(MailboxEntrySchema, { messageId: other }),
    ]);
    expect(r.known(MSG)).toEqual([{ emoji: "👍", count: 2, mine: true }, { emoji: "❤️", count: 1, mine: false }]);
    expect(r.known(other)).toBeUndefined();
    expect(sent.length).toBe(0); // the pull alone: no history request
  });

  it("sends typing at most every 2 s and expires a shown indication by itself", async () => {
    vi.useFakeTimers();
    try {
      const { h, told, sent } = host(() => toBinary(TypingOkSchema, create(TypingOkSchema, { delivered: true })));
      const r = new Reactions(h, ME, async () => 0n);
      expect(await r.typing(CONV)).toBe(true);
      expect(await r.typing(CONV)).toBe(false); // too soon: nothing sent
      expect(sent.map((s) => s.opcode)).toEqual([Op.TYPING]);
      h.frameHandlers.get(Op.TYPING_EVENTS)!(toBinary(TypingEventsSchema, create(TypingEventsSchema, {
        conversationId: CONV, userId: 8n, expiresInMs: 6000 })));
      expect(r.typingIn(CONV)).toEqual([8n]);
      vi.advanceTimersByTime(7000);
      expect(r.typingIn(CONV)).toEqual([]);
      expect(told.flatMap((e) => (e.type === "typing" ? [[e.userId, e.typing]] : []))).toEqual([[8n, true], [8n, false]]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a message from the typist ends its typing in that conversation at once; the later expiry tells nothing", () => {
    vi.useFakeTimers();
    try {
      const { h, told } = host(() => new Uint8Array());
      const r = new Reactions(h, ME, async () => 0n);
      const other = new Uint8Array(16).fill(3);
      const typing = (conv: Uint8Array, userId: bigint) => h.frameHandlers.get(Op.TYPING_EVENTS)!(toBinary(TypingEventsSchema,
        create(TypingEventsSchema, { conversationId: conv, userId, expiresInMs: 6000 })));
      const entry = (conv: Uint8Array, senderId: bigint, eventType: number = EventType.MESSAGE) =>
        create(MailboxEntrySchema, { eventType, conversationId: conv, senderId, messageId: MSG, body: new Uint8Array([104]) });
      typing(CONV, 8n);
      typing(other, 8n);
      typing(CONV, 9n);
      h.pulledHandlers[0]([entry(CONV, 8n, EventType.RECALL), entry(other, 9n)]); // neither ends 8's typing in CONV
      expect(r.typingIn(CONV)).toEqual([8n, 9n]);
      vi.advanceTimersByTime(1000);
      h.pulledHandlers[0]([entry(CONV, 8n)]); // what 8 typed has arrived
      expect(r.typingIn(CONV)).toEqual([9n]);
      expect(r.typingIn(other)).toEqual([8n]); // only in the message's conversation
      const stops = () => told.flatMap((e) => (e.type === "typing" && !e.typing ? [[toHex(e.conversationId), e.userId]] : []));
      expect(stops()).toEqual([[toHex(CONV), 8n]]);
      vi.advanceTimersByTime(7000); // the expiries: CONV's 8 is not told again
      expect(stops()).toEqual([[toHex(CONV), 8n], [toHex(other), 8n], [toHex(CONV), 9n]]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("keeps the highest version whatever order events, pulls, pages and replies come in", async () => {
    const pageBody = { value: new Uint8Array() };
    const { h, told } = host((opcode) => (opcode === Op.REACT
      ? toBinary(ReactOkSchema, create(ReactOkSchema, { summary: { counts: [count("🔥", 1, true)], version: 3n }, changed: true }))
      : pageBody.value));
    const r = new Reactions(h, ME, async () => 0n);
    const frame = (version: bigint, emoji: string, removed: boolean, counts: ReturnType<typeof count>[]) =>
      h.frameHandlers.get(Op.REACTION_EVENTS)!(toBinary(ReactionEventsSchema, create(ReactionEventsSchema, {
        conversationId: CONV, messageId: MSG, userId: 8n, emoji, removed, counts, version })));
    // the changes ran v1 add 🔥, v2 add 👍, v3 (ours, the reply below), v4 remove 🔥 by 8, v5 remove 👍 by 8;
    // the events arrive v2, v5, v1, v4
    frame(2n, "👍", false, [count("🔥", 1), count("👍", 1)]);
    frame(5n, "👍", true, []);
    frame(1n, "🔥", false, [count("🔥", 1)]);
    frame(4n, "🔥", true, [count("👍", 1)]);
    expect(r.known(MSG)).toEqual([]);
    expect(r.knownVersion(MSG)).toBe(5n);
    // only the newer ones were told, each with its version
    expect(told.flatMap((e) => (e.type === "reactions" ? [e.version] : []))).toEqual([2n, 5n]);
    expect(await r.add(CONV, MSG, "🔥")).toEqual([{ emoji: "🔥", count: 1, mine: true }]); // the reply, as read
    expect(r.knownVersion(MSG)).toBe(5n); // ... but an older one than held
    h.pulledHandlers[0]([create(MailboxEntrySchema, { messageId: MSG, reactions: { counts: [count("😂", 1)], version: 5n } })]);
    expect(r.known(MSG)).toEqual([]); // equal: nothing new
    h.pulledHandlers[0]([create(MailboxEntrySchema, { messageId: MSG, reactions: { counts: [count("😂", 1, true)], version: 6n } })]);
    expect(r.known(MSG)).toEqual([{ emoji: "😂", count: 1, mine: true }]);
    pageBody.value = toBinary(HistoryBatchSchema, create(HistoryBatchSchema, {
      items: [{ messageId: MSG, reactions: { version: 7n } }] })); // every reaction removed since
    expect((await r.summaries(CONV)).size).toBe(0);
    expect([r.known(MSG), r.knownVersion(MSG)]).toEqual([[], 7n]);
    frame(6n, "😂", false, [count("😂", 1)]); // a late event: not told, not kept
    expect([r.known(MSG), told.filter((e) => e.type === "reactions").length]).toEqual([[], 2]);
  });
});
