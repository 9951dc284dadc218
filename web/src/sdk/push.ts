/**
 * Device push registrations in qim-js (the counterpart of qim.sdk.push; docs/sdk.md
 * "Push registrations"; docs/decisions/0128): `client.push.register(...)` tells the
 * server where offline notifications for this device go (APNs, FCM, or the browser's
 * Web Push subscription: `fromSubscription(sub.toJSON())`), `unregister()` removes it
 * (call it at logout: QIM has no logout frame), `list()` is the user's registrations.
 * A registration is checked by the server's rules (qim/wire/push.py) before anything is
 * sent: PushInvalid (INVALID_ARGUMENT) names the rule; transient errors are retried
 * with bounded jittered backoff within the runtime's budget.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ErrorCode } from "../gen/qim/v1/common_pb";
import {
  ApnsEnvironment, PushListOkSchema, PushProvider, type PushRegistration as WireRegistration, PushRegisterOkSchema,
  PushRegisterSchema, PushUnregisterOkSchema,
} from "../gen/qim/v1/push_pb";
import { ServerError } from "./errors";
import { Op } from "./protocol";
import { Backoff, withRetry } from "./retry";

export const PUSH_PROVIDERS = { apns: PushProvider.APNS, fcm: PushProvider.FCM, webpush: PushProvider.WEBPUSH } as const;
export type PushProviderName = keyof typeof PUSH_PROVIDERS;
const ENVIRONMENTS = { sandbox: ApnsEnvironment.SANDBOX, production: ApnsEnvironment.PRODUCTION } as const;

/** A registration the server would refuse (INVALID_ARGUMENT); nothing was sent. */
export class PushInvalid extends ServerError {
  constructor(message: string) {
    super(ErrorCode.INVALID_ARGUMENT, message);
    this.name = "PushInvalid";
  }
}

/** What register() takes besides provider and token (provider fields empty when not its own). */
export interface PushOptions {
  content?: boolean;
  locale?: string;
  apnsTopic?: string;
  apnsEnvironment?: "sandbox" | "production";
  webpushP256dh?: string;
  webpushAuth?: string;
}

/** One device's registration as the server keeps it. */
export interface PushRegistration {
  deviceId: bigint;
  provider: PushProviderName;
  token: string;
  content: boolean;
  locale: string;
  apnsTopic: string;
  apnsEnvironment: string;
  webpushP256dh: string;
  webpushAuth: string;
  registeredAtMs: bigint;
}

/** What push.ts needs of the runtime. */
export interface PushHost {
  request(opcode: number, body: Uint8Array): Promise<{ opcode: number; body: Uint8Array }>;
  readonly retryBudgetMs: number;
}

/** The provider, token and keys of a browser PushSubscription (its toJSON()). */
export function fromSubscription(sub: { endpoint?: string; keys?: Record<string, string> }):
    { provider: "webpush"; token: string; webpushP256dh: string; webpushAuth: string } {
  return { provider: "webpush", token: sub.endpoint ?? "", webpushP256dh: sub.keys?.p256dh ?? "",
    webpushAuth: sub.keys?.auth ?? "" };
}

function b64urlLength(value: string, what: string): number {
  const bare = value.replace(/={0,2}$/, "");
  if (!/^[A-Za-z0-9_-]+$/.test(bare) || bare.length % 4 === 1) throw new PushInvalid(`${what}: not base64url`);
  return Math.floor((bare.length * 3) / 4);
}

function firstByte(value: string): number {
  const c = value.charAt(0), d = value.charAt(1);
  const idx = (x: string) => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".indexOf(x);
  return ((idx(c) << 2) | (idx(d) >> 4)) & 0xff;
}

function loopback(host: string): boolean {
  return host === "localhost" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** The rules of qim/wire/push.py (limits in docs/protocol.md "Push registrations"); PushInvalid. */
export function checkRegistration(provider: string, token: string, o: PushOptions): void {
  if (!Object.prototype.hasOwnProperty.call(PUSH_PROVIDERS, provider)) throw new PushInvalid("provider: one of apns, fcm, webpush");
  if (!token) throw new PushInvalid("token is empty");
  if (provider === "apns") {
    if (!(token.length >= 16 && token.length <= 200 && token.length % 2 === 0 && /^[0-9a-fA-F]+$/.test(token))) {
      throw new PushInvalid("apns token: an even number of 16..200 hex digits");
    }
    if (!o.apnsTopic || o.apnsTopic.length > 255 || !/^[A-Za-z0-9._-]+$/.test(o.apnsTopic)) {
      throw new PushInvalid("apns_topic: 1..255 characters of A-Z a-z 0-9 . _ -");
    }
    if (!o.apnsEnvironment || !(o.apnsEnvironment in ENVIRONMENTS)) throw new PushInvalid("apns_environment: sandbox or production");
  } else if (o.apnsTopic || o.apnsEnvironment) {
    throw new PushInvalid("apns_topic and apns_environment are for apns only");
  }
  if (provider === "fcm" && !(token.length <= 4096 && /^[\x21-\x7e]+$/.test(token))) {
    throw new PushInvalid("fcm token: 1..4096 printable ASCII characters without spaces");
  }
  if (provider === "webpush") {
    if (new TextEncoder().encode(token).length > 2048) throw new PushInvalid("webpush endpoint exceeds 2048 bytes");
    let url: URL;
    try { url = new URL(token); } catch { throw new PushInvalid("webpush endpoint: an absolute URL with a host is needed"); }
    if (!url.hostname) throw new PushInvalid("webpush endpoint: an absolute URL with a host is needed");
    if (url.protocol === "http:" && !loopback(url.hostname)) throw new PushInvalid("webpush endpoint must be https (http only for a loopback host)");
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new PushInvalid("webpush endpoint must be https");
    const p = o.webpushP256dh ?? "";
    if (b64urlLength(p, "webpush_p256dh") !== 65 || firstByte(p) !== 4) {
      throw new PushInvalid("webpush_p256dh: base64url of a 65-byte uncompressed P-256 point");
    }
    if (b64urlLength(o.webpushAuth ?? "", "webpush_auth") !== 16) throw new PushInvalid("webpush_auth: base64url of 16 bytes");
  } else if (o.webpushP256dh || o.webpushAuth) {
    throw new PushInvalid("webpush_p256dh and webpush_auth are for webpush only");
  }
  if (o.locale && !(o.locale.length <= 35 && /^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$/.test(o.locale))) {
    throw new PushInvalid("locale: a BCP 47 tag of at most 35 characters");
  }
}

function registration(r: WireRegistration): PushRegistration {
  const s = r.settings!;
  const provider = (Object.keys(PUSH_PROVIDERS) as PushProviderName[]).find((k) => PUSH_PROVIDERS[k] === s.provider)!;
  const env = (Object.keys(ENVIRONMENTS) as (keyof typeof ENVIRONMENTS)[]).find((k) => ENVIRONMENTS[k] === s.apnsEnvironment) ?? "";
  return { deviceId: r.deviceId, provider, token: s.token, content: s.content, locale: s.locale, apnsTopic: s.apnsTopic,
    apnsEnvironment: env, webpushP256dh: s.webpushP256dh, webpushAuth: s.webpushAuth, registeredAtMs: r.registeredAtMs };
}

/** The push registration calls of one runtime (module doc). */
export class Push {
  /** The user's registration version last answered (only grows). */
  version = 0n;

  constructor(private readonly host: PushHost) {}

  private async call(opcode: number, body: Uint8Array): Promise<Uint8Array> {
    const reply = await withRetry(() => this.host.request(opcode, body), new Backoff(50, 2000, this.host.retryBudgetMs));
    return reply.body;
  }

  private saw(version: bigint): void {
    if (version > this.version) this.version = version;
  }

  /** PUSH_REGISTER for this device (replacing its registration); PushInvalid before sending, ServerError. */
  async register(provider: PushProviderName, token: string, opts: PushOptions = {}): Promise<PushRegistration> {
    checkRegistration(provider, token, opts);
    const req = create(PushRegisterSchema, { provider: PUSH_PROVIDERS[provider], token, content: opts.content ?? true,
      locale: opts.locale ?? "", apnsTopic: opts.apnsTopic ?? "",
      apnsEnvironment: opts.apnsEnvironment ? ENVIRONMENTS[opts.apnsEnvironment] : ApnsEnvironment.UNSPECIFIED,
      webpushP256dh: opts.webpushP256dh ?? "", webpushAuth: opts.webpushAuth ?? "" });
    const ok = fromBinary(PushRegisterOkSchema, await this.call(Op.PUSH_REGISTER, toBinary(PushRegisterSchema, req)));
    this.saw(ok.version);
    return registration(ok.registration!);
  }

  /** PUSH_UNREGISTER: remove this device's registration (whether there was one). */
  async unregister(): Promise<boolean> {
    const ok = fromBinary(PushUnregisterOkSchema, await this.call(Op.PUSH_UNREGISTER, new Uint8Array()));
    this.saw(ok.version);
    return ok.removed;
  }

  /** PUSH_LIST: the user's live registrations, every device, by device id. */
  async list(): Promise<PushRegistration[]> {
    const ok = fromBinary(PushListOkSchema, await this.call(Op.PUSH_LIST, new Uint8Array()));
    this.saw(ok.version);
    return ok.registrations.map(registration);
  }
}
