/**
 * qim-js moves to another gateway when one fails (issue 34 item 2; gateways.ts,
 * docs/decisions/0082). One fake backend behind two endpoints, as two gateways of one
 * deployment share the servers: an endpoint can refuse, hang (a frozen process: the
 * upgrade is never answered) or drop its links.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { fromUtf8 } from "../src/sdk/bytes";
import { Client } from "../src/sdk/client";
import { parseEndpoints } from "../src/sdk/gateways";
import type { Dialer } from "../src/sdk/transport";
import { FakeGateway } from "./fakeserver";

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const token = (user: bigint, dev: bigint) =>
  `${b64({ alg: "EdDSA" })}.${b64({ sub: String(user), dev: String(dev), tenant: "0".repeat(32) })}.sig`;
const FAST = { timing: { authTimeoutMs: 500, ackDeadlineMs: 3000, probeMs: 4000 }, reconnectBackoffMs: [5, 20] as [number, number] };
let port = 9400;

const until = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
};

/** Two endpoints in front of one fake backend; `frozen` endpoints never answer a dial. */
function twoGateways() {
  const gw = new FakeGateway(1001n, 1n);
  const a = `ws://127.0.0.1:${port++}/qim/ws`, b = `ws://127.0.0.1:${port++}/qim/ws`;
  const frozen = new Set<string>();
  const dialed: string[] = [];
  const dial: Dialer = (ep) => {
    dialed.push(ep);
    return frozen.has(ep) ? new Promise(() => undefined) : gw.dial(ep);
  };
  return { gw, a, b, frozen, dialed, dial };
}

describe("qim-js gateway failover", () => {
  it("parses a list or a comma-separated string, refusing none and repeats", () => {
    expect(parseEndpoints("ws://h:1/q, ws://h:2/q")).toEqual(["ws://h:1/q", "ws://h:2/q"]);
    expect(parseEndpoints(["ws://h:1/q"])).toEqual(["ws://h:1/q"]);
    expect(() => parseEndpoints(" , ")).toThrow(/no gateway/);
    expect(() => parseEndpoints(["ws://h:1/q", "ws://h:1/q"])).toThrow(/twice/);
  });

  it("connect() goes on to the next gateway when the first does not answer", async () => {
    const g = twoGateways();
    g.frozen.add(g.a);
    const c = await Client.open([g.a, g.b], token(1001n, 1n), { ...FAST, dial: g.dial });
    await c.connect();
    expect(c.runtime.endpoint).toBe(g.b);
    expect(g.dialed).toEqual([g.a, g.b]);
    c.close();
  });

  it("a lost connection reconnects to the other gateway and syncs there", async () => {
    const g = twoGateways();
    const c = await Client.open([g.a, g.b], token(1001n, 1n), { ...FAST, dial: g.dial });
    await c.connect();
    expect(c.runtime.endpoint).toBe(g.a);
    const conv = (await c.openDirect(1002n)).conversationId;
    g.frozen.add(g.a); // gateway A freezes: its link drops, new dials to it hang
    g.gw.deliver({ eventType: 1, messageId: new Uint8Array(16).fill(3), conversationId: conv, conversationSeq: 1n,
      senderId: 1002n, createdAtMs: 5n, messageType: 1, body: new TextEncoder().encode("while A is frozen") });
    for (const l of g.gw.links) l.close("frozen");
    await until(() => c.state === "ready" && c.runtime.endpoint === g.b);
    const got = await c.messages(conv);
    expect(got.map((m) => fromUtf8(m.body))).toEqual(["while A is frozen"]); // the sync on B pulled it
    expect(g.dialed.slice(1)).toEqual([g.b]); // never back to the frozen one first
    expect(c.runtime.gateways.moves).toBe(1);
    c.close();
  });

  it("the store is the deployment's, whichever gateway comes first", async () => {
    const g = twoGateways();
    const one = await Client.open([g.a, g.b], token(1001n, 7n), { dial: g.dial });
    const other = await Client.open([g.b, g.a], token(1001n, 7n), { dial: g.dial, deployment: g.a });
    expect(other.store.name).toBe(one.store.name);
    expect(one.runtime.endpoint).toBe(g.a);
    expect(other.runtime.endpoint).toBe(g.b);
  });
});

describe("qim-js token provider", () => {
  it("one provider call at a time: concurrent callers share its token", async () => {
    const g = twoGateways();
    let calls = 0;
    const provider = async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 50));
      return token(1001n, 1n);
    };
    const c = await Client.open([g.a], token(1001n, 1n), { ...FAST, dial: g.dial, tokenProvider: provider });
    c.runtime.wantFreshToken();
    const ask = () => (c.runtime as unknown as { currentToken(): Promise<string> }).currentToken();
    const got = await Promise.all([ask(), ask(), ask()]);
    expect(calls).toBe(1);
    expect(new Set(got).size).toBe(1);
    await ask(); // fresh now: no call
    expect(calls).toBe(1);
  });
});
