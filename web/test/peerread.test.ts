// A read tick is told once per newer READ_RECEIPT, whatever the list said before it
// (src/sdk/convstate.ts, the same rule as qim/sdk/convstate.py): the peer's read position
// rides on READ_RECEIPT and on the user's SESSION_DELTA entry; seen first in the delta, the
// receipt after it was not newer than the position it had set, and no tick was told.
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ReadReceiptSchema } from "../src/gen/qim/v1/convstate_pb";
import { SessionEntrySchema } from "../src/gen/qim/v1/session_pb";
import { ConvStates } from "../src/sdk/convstate";
import type { RuntimeCore } from "../src/sdk/core";
import type { QimEvent } from "../src/sdk/events";
import { Op } from "../src/sdk/protocol";

const CONV = new Uint8Array(16).fill(1);

function setup() {
  const told: QimEvent[] = [];
  const frameHandlers = new Map<number, (body: Uint8Array) => void>();
  const rt = { frameHandlers, emit: (e: QimEvent) => told.push(e), tell: () => undefined };
  const states = new ConvStates(rt as unknown as RuntimeCore);
  const receipt = (seq: bigint) => frameHandlers.get(Op.READ_RECEIPT)!(toBinary(ReadReceiptSchema,
    create(ReadReceiptSchema, { conversationId: CONV, readerUserId: 42n, readConversationSeq: seq })));
  const entry = (peerReadSeq: bigint) => create(SessionEntrySchema, { conversationId: CONV, peerUserId: 42n, peerReadSeq });
  const ticks = () => told.flatMap((e) => (e.type === "peerRead" ? [[e.readerUserId, e.seq]] : []));
  return { states, receipt, entry, ticks };
}

describe("qim-js read ticks", () => {
  it("the delta first, then the receipt tells the tick once", () => {
    const { states, receipt, entry, ticks } = setup();
    states.noteEntries([entry(3n)]);
    expect(ticks()).toEqual([]);
    receipt(3n);
    receipt(3n);
    expect(ticks()).toEqual([[42n, 3n]]);
  });
  it("the receipt first tells the tick, the delta and an older receipt after it nothing more", () => {
    const { states, receipt, entry, ticks } = setup();
    receipt(3n);
    states.noteEntries([entry(3n)]);
    receipt(2n);
    expect(ticks()).toEqual([[42n, 3n]]);
    expect(states.get(CONV).peerReadSeq).toBe(3n);
  });
});
