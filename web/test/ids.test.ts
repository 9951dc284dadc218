import { describe, expect, it } from "vitest";
import * as ids from "../src/sdk/ids";
import { isNamedError, loadVectors, plain } from "./vectors";

const V: any[] = loadVectors("ids.json");
const FNS: Record<string, (...a: any[]) => unknown> = {
  conversation_id_direct: ids.conversationIdDirect,
  conversation_id_group: ids.conversationIdGroup,
  conversation_id_room: ids.conversationIdRoom,
  conversation_kind: ids.conversationKind,
  commit_bucket: ids.commitBucket,
  lane_id: ids.laneId,
  virtual_bucket: ids.virtualBucket,
  mailbox_shard: (t, u, c) => ids.mailboxShard(t, u, Number(c)),
  user_placement: (t, u, c) => ids.userPlacement(t, u, Number(c)),
  dispatch_id: ids.dispatchId,
  event_id: (d, u, e) => ids.eventId(d, u, Number(e)),
  client_message_id: ids.clientMessageId,
  endpoint_scope: ids.endpointScope,
  compose_message_id: ids.composeMessageId,
  split_message_id: ids.splitMessageId,
};
const big = (a: unknown[]) => a.map((x) => (typeof x === "number" ? BigInt(x) : x));

describe("ids golden vectors (tests/vectors/ids.json)", () => {
  it("covers every function of the vectors", () => {
    expect(new Set(V.map((c) => c.fn))).toEqual(new Set(Object.keys(FNS)));
  });
  for (const [i, c] of V.entries()) {
    it(`${i} ${c.fn}${c.error ? " → " + c.error : ""}`, () => {
      const call = () => FNS[c.fn](...big(c.args));
      if (c.error) {
        let err: unknown;
        try {
          call();
        } catch (e) {
          err = e;
        }
        expect(isNamedError(err, c.error), `expected ${c.error}, got ${err}`).toBe(true);
      } else {
        expect(plain(call())).toEqual(plain(c.result));
      }
    });
  }
});
