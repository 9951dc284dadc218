// qim-js push registrations without a network (src/sdk/push.ts; the rules of
// qim/wire/push.py, decision 0128): register sends PUSH_REGISTER with the provider's
// fields (a browser PushSubscription through fromSubscription), list and unregister
// read their replies and keep the highest version; bad input is refused before sending.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../src/gen/qim/v1/common_pb";
import {
  ApnsEnvironment, PushListOkSchema, PushProvider, PushRegisterOkSchema, PushRegisterSchema, PushRegistrationSchema,
  PushUnregisterOkSchema,
} from "../src/gen/qim/v1/push_pb";
import { Op } from "../src/sdk/protocol";
import { fromSubscription, Push, PushInvalid, type PushHost } from "../src/sdk/push";

const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const P256DH = b64(new Uint8Array(65).fill(7).map((v, i) => (i === 0 ? 4 : v)));
const AUTH = b64(new Uint8Array(16).fill(3));

describe("qim-js push registrations", () => {
  it("registers, lists and unregisters; refuses bad input before sending", async () => {
    const sent: { opcode: number; body: Uint8Array }[] = [];
    let kept = create(PushRegisterSchema, {});
    const host: PushHost = {
      retryBudgetMs: 1000,
      request: async (opcode, body) => {
        sent.push({ opcode, body });
        if (opcode === Op.PUSH_REGISTER) {
          kept = fromBinary(PushRegisterSchema, body);
          const registration = create(PushRegistrationSchema, { deviceId: 4n, settings: kept, registeredAtMs: 9n });
          return { opcode: Op.PUSH_REGISTER_OK, body: toBinary(PushRegisterOkSchema, create(PushRegisterOkSchema, { registration, version: 3n })) };
        }
        if (opcode === Op.PUSH_LIST) {
          const registration = create(PushRegistrationSchema, { deviceId: 4n, settings: kept });
          return { opcode: Op.PUSH_LIST_OK, body: toBinary(PushListOkSchema, create(PushListOkSchema, { registrations: [registration], version: 2n })) };
        }
        return { opcode: Op.PUSH_UNREGISTER_OK, body: toBinary(PushUnregisterOkSchema, create(PushUnregisterOkSchema, { removed: true, version: 5n })) };
      },
    };
    const push = new Push(host);
    const sub = fromSubscription({ endpoint: "https://push.example.net/s/1", keys: { p256dh: P256DH, auth: AUTH } });
    const got = await push.register(sub.provider, sub.token, { ...sub, content: false, locale: "fr-CA" });
    expect([got.provider, got.deviceId, got.content, got.locale, got.webpushAuth]).toEqual(["webpush", 4n, false, "fr-CA", AUTH]);
    const req = fromBinary(PushRegisterSchema, sent[0].body);
    expect([sent[0].opcode, req.provider, req.token, req.webpushP256dh]).toEqual([Op.PUSH_REGISTER, PushProvider.WEBPUSH, sub.token, P256DH]);
    await push.register("apns", "ab".repeat(32), { apnsTopic: "com.example.chat", apnsEnvironment: "sandbox" });
    expect(fromBinary(PushRegisterSchema, sent[1].body).apnsEnvironment).toBe(ApnsEnvironment.SANDBOX);
    expect((await push.list()).map((r) => [r.deviceId, r.provider, r.apnsEnvironment])).toEqual([[4n, "apns", "sandbox"]]);
    expect(push.version).toBe(3n); // the list's older version does not lower it
    expect(await push.unregister()).toBe(true);
    expect(push.version).toBe(5n);

    const bad: [string, string, object, string][] = [
      ["pager", "x", {}, "provider"],
      ["fcm", "", {}, "empty"],
      ["apns", "zz".repeat(32), { apnsTopic: "a", apnsEnvironment: "sandbox" }, "hex"],
      ["apns", "ab".repeat(32), { apnsEnvironment: "sandbox" }, "apns_topic"],
      ["fcm", "y".repeat(4097), {}, "fcm token"],
      ["webpush", "http://push.example.net/x", { webpushP256dh: P256DH, webpushAuth: AUTH }, "https"],
      ["webpush", sub.token, { webpushP256dh: "a+b", webpushAuth: AUTH }, "webpush_p256dh"],
      ["webpush", sub.token, { webpushP256dh: P256DH, webpushAuth: b64(new Uint8Array(15)) }, "webpush_auth"],
      ["fcm", "tok", { locale: "not a locale" }, "locale"],
    ];
    for (const [provider, token, opts, word] of bad) {
      const err = await push.register(provider as never, token, opts).catch((e) => e);
      expect(err).toBeInstanceOf(PushInvalid);
      expect([err.code, err.message.includes(word)]).toEqual([ErrorCode.INVALID_ARGUMENT, true]);
    }
    // http to a loopback host is what a local push service uses: allowed
    await push.register("webpush", "http://127.0.0.1:8099/p", { webpushP256dh: P256DH, webpushAuth: AUTH });
    expect(sent.length).toBe(5);
  });
});
