// qim-js keeps the user's badge (UserBadgeState, docs/decisions/0129; src/sdk/sessions.ts):
// SESSION_DELTA and list pages carry (badge, version); only a higher version replaces what
// is held and is told as the "badge" event, so a late frame never shows an older badge.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { SessionDeltaSchema, SessionEntrySchema } from "../src/gen/qim/v1/session_pb";
import type { RuntimeCore } from "../src/sdk/core";
import type { QimEvent } from "../src/sdk/events";
import { Sessions } from "../src/sdk/sessions";

function fakeRuntime() {
  const told: QimEvent[] = [];
  const applied: number[] = [];
  const rt = {
    afterSync: [] as unknown[],
    onSessionDelta: undefined as unknown,
    onReadSync: undefined as unknown,
    emit: (e: QimEvent) => told.push(e),
    tell: () => undefined,
    store: { applySessions: async (s: unknown[]) => { applied.push(s.length); return {}; } },
  };
  return { rt: rt as unknown as RuntimeCore & { onSessionDelta: (d: unknown) => void }, told, applied };
}

describe("qim-js badge", () => {
  it("keeps the highest version, tells each newer one once, ignores late frames", async () => {
    const { rt, told, applied } = fakeRuntime();
    const sessions = new Sessions(rt);
    expect(sessions.badge).toEqual({ badge: 0n, version: 0n });
    const delta = (badge: bigint, badgeVersion: bigint, n = 0) => create(SessionDeltaSchema, {
      badge, badgeVersion, sessions: Array.from({ length: n }, () => create(SessionEntrySchema, {})) });
    rt.onSessionDelta(delta(3n, 2n));
    rt.onSessionDelta(delta(5n, 1n)); // late: an older version never shows
    rt.onSessionDelta(delta(0n, 4n, 1));
    rt.onSessionDelta(delta(0n, 4n)); // the same version again: not told twice
    await new Promise((r) => setTimeout(r, 0));
    expect(sessions.badge).toEqual({ badge: 0n, version: 4n });
    expect(told.filter((e) => e.type === "badge").map((e) => e.type === "badge" && [e.badge, e.version]))
      .toEqual([[3n, 2n], [0n, 4n]]);
    expect(applied).toEqual([1]); // a badge-only delta applies no sessions
  });
});
