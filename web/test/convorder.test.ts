// Pin, mute and hide arrive from three places (the reply, another device's
// CONVERSATION_STATE_SYNC, and SESSION_DELTA / list entries); a SESSION_DELTA summarized
// before a change can arrive after it. src/sdk/convstate.ts keeps the state of the
// highest version seen (docs/decisions/0157, the same rule as qim/sdk/convstate.py).
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ConversationStateSchema } from "../src/gen/qim/v1/convstate_pb";
import { HistoryItemSchema } from "../src/gen/qim/v1/history_pb";
import { SessionEntrySchema } from "../src/gen/qim/v1/session_pb";
import { ConvStates } from "../src/sdk/convstate";
import type { RuntimeCore } from "../src/sdk/core";
import type { QimEvent } from "../src/sdk/events";
import { Op } from "../src/sdk/protocol";

const CONV = new Uint8Array(16).fill(2);

function setup() {
  const told: QimEvent[] = [];
  const frameHandlers = new Map<number, (body: Uint8Array) => void>();
  const store = { conversation: async () => ({ lastMessage: { conversationSeq: 4n } }) };
  const rt = { frameHandlers, emit: (e: QimEvent) => told.push(e), tell: () => undefined, store };
  const states = new ConvStates(rt as unknown as RuntimeCore);
  const sync = async (hidden: boolean, version: bigint) => {
    frameHandlers.get(Op.CONVERSATION_STATE_SYNC)!(toBinary(ConversationStateSchema,
      create(ConversationStateSchema, { conversationId: CONV, hidden, version })));
    await new Promise((r) => setTimeout(r, 0)); // the sync reads the stored head first
  };
  const entry = (hidden: boolean, stateVersion: bigint, mentioned = false) => create(SessionEntrySchema, {
    conversationId: CONV, hidden, stateVersion, mentioned,
    lastMessage: create(HistoryItemSchema, { conversationSeq: 4n }) });
  const changes = () => told.filter((e) => e.type === "conversationState").length;
  return { states, sync, entry, changes };
}

describe("qim-js conversation state order", () => {
  it("a delta summarized before the hide does not show the chat again", async () => {
    const { states, sync, entry } = setup();
    states.noteEntries([entry(false, 1n)]);
    await sync(true, 2n);
    expect(states.get(CONV).hidden).toBe(true);
    states.noteEntries([entry(false, 1n, true)]); // late: its choices are ignored, its mention is not
    expect(states.get(CONV).hidden).toBe(true);
    expect(states.get(CONV).mentioned).toBe(true);
    expect(states.get(CONV).version).toBe(2n);
  });
  it("a later version applies, and a late sync changes nothing", async () => {
    const { states, sync, entry } = setup();
    await sync(true, 2n);
    states.noteEntries([entry(false, 3n)]);
    expect(states.get(CONV).hidden).toBe(false);
    await sync(true, 2n);
    expect(states.get(CONV).hidden).toBe(false);
    expect(states.get(CONV).version).toBe(3n);
  });
  it("the same state under a new version is kept but not told", async () => {
    const { states, entry, changes } = setup();
    states.noteEntries([entry(true, 1n)]);
    expect(changes()).toBe(1);
    states.noteEntries([entry(true, 2n)]);
    expect(changes()).toBe(1);
    expect(states.get(CONV).version).toBe(2n);
  });
  it("an older server (version 0 everywhere) applies every state as before", () => {
    const { states, entry } = setup();
    states.noteEntries([entry(true, 0n)]);
    states.noteEntries([entry(false, 0n)]);
    expect(states.get(CONV).hidden).toBe(false);
  });
});
