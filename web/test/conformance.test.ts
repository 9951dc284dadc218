/**
 * The conformance suite against qim-js (docs/sdk.md "Conformance suite", decision 0107):
 * every scenario file of tests/conformance/scenarios/ (the same files the Python runner
 * reads) played by the one scripted server, tests/conformance/player.py, started as a
 * child process per scenario (../.venv/bin/python, or $QIM_PYTHON) and reached over
 * plaintext TCP on loopback. The player runs the server's steps and hands every app step
 * to this runner ({"turn": i} → {"done": i} | {"fail": i, "why"}), which does it on a
 * real qim-js Client (fake-indexeddb, a store per scenario). The neutral vocabulary maps to qim-js: EVENT_TYPES.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { fromUtf8 } from "../src/sdk/bytes";
import { Client } from "../src/sdk/client";
import * as errors from "../src/sdk/errors";
import type { QimEvent } from "../src/sdk/events";
import { FRAME_HEADER_LEN, decodeHeader } from "../src/sdk/frame";
import { conversationIdGroup } from "../src/sdk/ids";
import type { Dialer, Transport } from "../src/sdk/transport";

const ROOT = resolve(__dirname, "../..");
const DIR = join(ROOT, "tests/conformance/scenarios");
const PYTHON = process.env.QIM_PYTHON ?? join(ROOT, ".venv/bin/python");
const USER = 1001n;
const TELL_TIMEOUT_MS = 15000; // generous for a busy machine; a correct SDK tells in milliseconds
const EVENT_TYPES: Record<string, QimEvent["type"]> = {
  state: "state", message_added: "messagesAdded", pending_resolved: "pendingResolved", send_failed: "sendFailed",
  kicked: "kicked", cursor_reset: "cursorReset", room_events: "roomEvents",
};
type Step = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const token = (name: string) =>
  `${b64({ alg: "EdDSA" })}.${b64({ sub: String(USER), dev: "1", tenant: "0".repeat(32), name })}.sig`;

/** A Dialer over TCP: the stream cut into whole chunks, as the WebSocket transport delivers them. */
function tcpDialer(port: number): Dialer {
  return () => new Promise<Transport>((ok, fail) => {
    const sock = connect(port, "127.0.0.1");
    let buf = Buffer.alloc(0);
    let closed = false;
    const t: Transport = {
      send: (chunk) => void sock.write(chunk),
      close: (reason) => { sock.destroy(); end(reason); },
      onMessage: () => undefined,
      onClose: () => undefined,
    };
    const end = (reason: string) => { if (!closed) { closed = true; t.onClose(reason); } };
    sock.on("connect", () => ok(t));
    sock.on("error", (e) => (closed ? undefined : fail(new errors.ConnectionLost(String(e)))));
    sock.on("close", () => end("closed by the player"));
    sock.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= FRAME_HEADER_LEN) {
        const size = FRAME_HEADER_LEN + decodeHeader(new Uint8Array(buf), 0)[4];
        if (buf.length < size) break;
        t.onMessage(new Uint8Array(buf.subarray(0, size)));
        buf = buf.subarray(size);
      }
    });
  });
}

const camel = (s: string) => s.replace(/_(.)/g, (_m, c: string) => c.toUpperCase());
const same = (have: unknown, want: unknown) => (typeof have === "bigint" ? have === BigInt(want as number) : have === want);

/** The neutral fields of a step against one qim-js event. */
function matches(e: QimEvent, fields: Step): boolean {
  return Object.entries(fields).every(([k, want]) => {
    const ev = e as unknown as Record<string, unknown>;
    if (k === "text") {
      const items = (ev.messages ?? ev.events ?? []) as { body: Uint8Array }[];
      return items.some((m) => fromUtf8(m.body) === want);
    }
    if (k === "conversation_seq") return (ev.acks as { conversationSeq: bigint }[]).some((a) => a.conversationSeq === BigInt(want));
    return same(ev[camel(k)], want);
  });
}

/** The app's steps of one scenario on one qim-js Client. */
class AppSide {
  seen = 0;
  started = new Map<string, Promise<unknown>>();

  constructor(readonly c: Client, readonly told: QimEvent[]) {}

  async turn(step: Step): Promise<void> {
    const kind = Object.keys(step)[0];
    if (kind === "app") return this.app(step);
    if (kind === "tell") return this.tell(step);
    if (kind === "outcome") return this.outcome(step);
    return this.query(step);
  }

  private async app(step: Step): Promise<void> {
    const c = this.c;
    let job: Promise<unknown>;
    if (step.app === "open_direct") {
      await c.openDirect(BigInt(step.peer));
      return;
    } else if (step.app === "connect") job = c.connect();
    else if (step.app === "send_text") job = c.sendText(c.directId(BigInt(step.peer)), step.text);
    else if (step.app === "leave_group") job = c.leaveGroup(BigInt(step.group));
    else job = c.joinRoom(BigInt(step.room));
    job.catch(() => undefined); // judged by its outcome step
    this.started.set(step.as ?? step.app, job);
  }

  private async outcome(step: Step): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise((_ok, fail) => { timer = setTimeout(() => fail(new Error("late")), TELL_TIMEOUT_MS); });
    try {
      await Promise.race([this.started.get(step.outcome), late]);
    } catch (e) {
      if ((e as Error).message === "late") throw new Error("the action did not end in time");
      const cls = (errors as Record<string, unknown>)[step.raises ?? ""] as (new (...a: never[]) => Error) | undefined;
      if (!step.raises || !cls || !(e instanceof cls) || ("code" in step && (e as errors.ServerError).code !== step.code)) {
        throw new Error(`raised ${String(e)}, the script says ${step.raises ?? "nothing"} ${step.code ?? ""}`);
      }
      return;
    } finally {
      clearTimeout(timer);
    }
    if (step.raises) throw new Error(`ended without raising ${step.raises}`);
  }

  private async tell(step: Step): Promise<void> {
    const type = EVENT_TYPES[step.tell];
    const end = Date.now() + TELL_TIMEOUT_MS;
    while (Date.now() < end) {
      for (let j = this.seen; j < this.told.length; j++) {
        if (this.told[j].type === type && matches(this.told[j], step.fields ?? {})) {
          this.seen = j + 1;
          return;
        }
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`not told; told since the last match: ${this.told.slice(this.seen).map((e) => e.type).join(", ")}`);
  }

  private async query(step: Step): Promise<void> {
    const conv = "group" in step ? conversationIdGroup(0n, BigInt(step.group)) : this.c.directId(BigInt(step.peer));
    const have = (await this.c.conversation(conv))?.unread ?? null;
    if (have !== step.unread) throw new Error(`unread is ${have}, the script says ${step.unread}`);
  }
}

/** Play one scenario file: the player as a child process, this runner as the app. */
async function play(file: string): Promise<void> {
  const steps: Step[] = JSON.parse(readFileSync(join(DIR, file), "utf8")).steps;
  const child = spawn(PYTHON, ["-m", "tests.conformance.player", join(DIR, file), "js"], { cwd: ROOT,
    stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<Step> => {
    const r = await lines.next();
    if (r.done) throw new Error("the player exited without a verdict");
    return JSON.parse(r.value);
  };
  let client: Client | null = null;
  try {
    const port = (await next()).port as number;
    client = await Client.open(`ws://127.0.0.1:${port}/qim`, token("first"), { dial: tcpDialer(port),
      deployment: `conformance-${file}-${Date.now()}`, reconnectBackoffMs: [50, 200], tokenProvider: async () => token("fresh") });
    const told: QimEvent[] = [];
    client.on((e) => told.push(e));
    const app = new AppSide(client, told);
    for (;;) {
      const msg = await next();
      if ("end" in msg) {
        expect(msg.why ?? "", file).toBe("");
        expect(msg.end).toBe("ok");
        return;
      }
      try {
        await app.turn(steps[msg.turn]);
        child.stdin!.write(JSON.stringify({ done: msg.turn }) + "\n");
      } catch (e) {
        child.stdin!.write(JSON.stringify({ fail: msg.turn, why: String(e) }) + "\n");
      }
    }
  } finally {
    client?.close();
    child.kill();
  }
}

describe("conformance scenarios (tests/conformance/scenarios) against qim-js", () => {
  it("finds the Python that runs the scripted server", () => {
    expect(existsSync(PYTHON), `${PYTHON}: make install first, or set QIM_PYTHON`).toBe(true);
  });
  for (const file of readdirSync(DIR).filter((f) => f.endsWith(".json")).sort()) {
    it(file.replace(/\.json$/, ""), () => play(file), 60000);
  }
});
