/**
 * Media in qim-js (the counterpart of qim.sdk.media; docs/sdk.md "Media";
 * docs/decisions/0138). `upload` POSTs a file to the MediaService (`POST /v1/media` with
 * the device's bearer token, its declared size, SHA-256 by WebCrypto and type sniffed
 * from the first bytes as qim/wire/media.py `sniff` does); the service checks them,
 * strips image metadata and answers a signed MediaRef, which the client sends as the
 * body of a MEDIA message. `fetchMedia` GETs the original through the message that
 * holds it and checks its SHA-256 against the reference.
 *
 * Refusals are MediaRefused with the HTTP status and the service's one-line reason
 * (413 too large, 415 not an allowed type or not its declared type, 422 too many pixels,
 * 429 the day's quota, 403 not a member, 404 a message this user cannot see, 410
 * recalled or deleted; 502 when the bytes do not match the reference, 0 when the
 * service could not be reached). Large files that are not images go in presigned parts
 * (mediaparts.ts; client.sendMedia chooses, as qim.sdk does above LARGE_BYTES).
 */

import { fromBinary } from "@bufbuild/protobuf";
import { MediaRefSchema, type MediaRef } from "../gen/qim/v1/media_pb";
import { equalBytes, toHex } from "./bytes";

/** (bytes sent, bytes in all) as an upload goes. */
export type Progress = (sent: number, total: number) => void;

/** The types the MediaService takes (qim/wire/media.py ALLOWED); images always pass the service. */
export const IMAGE_TYPES = ["image/jpeg", "image/png", "image/webp", "image/gif"] as const;

/** The MediaService refused (or could not be reached: status 0); `reason` is safe to show. */
export class MediaRefused extends Error {
  constructor(readonly status: number, readonly reason: string) {
    super(`${status}: ${reason}`);
    this.name = "MediaRefused";
  }
}

/** How media.ts talks HTTP: `fetch` (a fake in unit tests; the global one by default). */
export interface MediaHttp {
  fetch?: typeof fetch;
}

/** The service's answer to an upload: the reference and its serialized bytes (the MEDIA body). */
export interface Uploaded {
  ref: MediaRef;
  body: Uint8Array;
}

const HEADS: [number, number[], string][] = [
  [0, [0xff, 0xd8, 0xff], "image/jpeg"],
  [0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "image/png"],
  [0, [0x47, 0x49, 0x46, 0x38, 0x37, 0x61], "image/gif"],
  [0, [0x47, 0x49, 0x46, 0x38, 0x39, 0x61], "image/gif"],
  [4, [0x66, 0x74, 0x79, 0x70], "video/mp4"],
  [0, [0x4f, 0x67, 0x67, 0x53], "audio/ogg"],
  [0, [0x25, 0x50, 0x44, 0x46, 0x2d], "application/pdf"],
];

/** The type of `data` by its first bytes (the rule of qim/wire/media.py `sniff`). */
export function sniff(data: Uint8Array): string {
  const at = (off: number, sig: number[]) => sig.every((b, i) => data[off + i] === b);
  if (at(0, [0x52, 0x49, 0x46, 0x46]) && at(8, [0x57, 0x45, 0x42, 0x50])) return "image/webp";
  for (const [off, sig, mime] of HEADS) if (at(off, sig)) return mime;
  return "application/octet-stream";
}

/** The MEDIA body's reference (unverified: the writer verified it); MediaRefused(0) when it does not decode. */
export function decodeRef(body: Uint8Array): MediaRef {
  try {
    return fromBinary(MediaRefSchema, body);
  } catch {
    throw new MediaRefused(0, "MEDIA body is not a MediaRef");
  }
}

/**
 * Bytes as a person reads them, in binary units as the service's refusals and qim-desktop
 * say them: "512 B", "8.0 KiB", "17.0 MiB" (1 KiB = 1,024 bytes).
 */
export function humanSize(bytes: number | bigint): string {
  const n = Number(bytes);
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/** SHA-256 of `data` as 64 hex characters (WebCrypto). */
export async function sha256Hex(data: Uint8Array): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(data))));
}

/** Base64 text as bytes (the service's JSON carries the reference so). */
export function b64decode(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

/** A refusal answer as MediaRefused: its status and first line of text. */
export async function refusal(r: Response): Promise<MediaRefused> {
  const text = (await r.text().catch(() => "")).trim();
  return new MediaRefused(r.status, text || r.statusText || "refused");
}

/** POST through XMLHttpRequest so that the upload's progress is told (fetch cannot). */
function xhrPost(url: string, headers: Record<string, string>, data: Uint8Array,
  progress?: Progress): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open("POST", url);
    for (const [k, v] of Object.entries(headers)) if (k !== "Content-Length") x.setRequestHeader(k, v);
    if (progress) x.upload.onprogress = (e) => progress(e.loaded, data.length);
    if (progress) x.upload.onload = () => progress(data.length, data.length); // all sent, whatever the last chunk told
    x.onload = () => resolve({ status: x.status, text: x.responseText });
    x.onerror = () => reject(new MediaRefused(0, "the media service could not be reached"));
    x.send(new Blob([new Uint8Array(data)]));
  });
}

/**
 * Upload `data` to the MediaService at `mediaUrl` (its base URL) as the device of
 * `token`; `mime` defaults to the type sniffed from the bytes, `name` is metadata only
 * (no path: the service refuses one). Progress through XMLHttpRequest in a browser
 * (each chunk) or, with `http.fetch`, at the start and the end. MediaRefused otherwise.
 */
export async function upload(mediaUrl: string, token: string, data: Uint8Array,
  opts: { mime?: string; name?: string; keepMetadata?: boolean; progress?: Progress } = {},
  http: MediaHttp = {}): Promise<Uploaded> {
  const headers: Record<string, string> = {
    Authorization: `Bearer ${token}`,
    "Content-Type": opts.mime || sniff(data),
    "X-QIM-Size": String(data.length),
    "X-QIM-SHA256": await sha256Hex(data),
  };
  const q = new URLSearchParams({ name: opts.name ?? "" });
  if (opts.keepMetadata) q.set("keep_metadata", "1");
  const url = `${mediaUrl.replace(/\/+$/, "")}/v1/media?${q}`;
  let status: number;
  let text: string;
  if (!http.fetch && typeof XMLHttpRequest !== "undefined") {
    ({ status, text } = await xhrPost(url, headers, data, opts.progress));
  } else {
    opts.progress?.(0, data.length);
    let r: Response;
    try {
      r = await (http.fetch ?? fetch)(url, { method: "POST", headers, body: new Blob([new Uint8Array(data)]) });
    } catch {
      throw new MediaRefused(0, "the media service could not be reached");
    }
    if (r.status !== 201) throw await refusal(r);
    [status, text] = [r.status, await r.text()];
    opts.progress?.(data.length, data.length);
  }
  if (status !== 201) throw new MediaRefused(status, text.trim() || "refused");
  const body = b64decode((JSON.parse(text) as { ref: string }).ref);
  return { ref: decodeRef(body), body };
}

/**
 * GET the original of `ref` through message `messageId` of `conv` (`peer`: a direct
 * conversation's other participant, 0n for a group) with the bearer token, checked
 * against ref.sha256; a Blob of ref.mime. MediaRefused otherwise.
 */
export async function fetchMedia(mediaUrl: string, token: string, ref: MediaRef, conv: Uint8Array,
  messageId: Uint8Array, peer: bigint, http: MediaHttp = {}): Promise<Blob> {
  const q = new URLSearchParams({ conversation: toHex(conv), message: toHex(messageId), peer: String(peer) });
  const url = `${mediaUrl.replace(/\/+$/, "")}/v1/media/${encodeURIComponent(ref.mediaId)}?${q}`;
  let r: Response;
  try {
    r = await (http.fetch ?? fetch)(url, { headers: { Authorization: `Bearer ${token}` } });
  } catch {
    throw new MediaRefused(0, "the media service could not be reached");
  }
  if (r.status !== 200) throw await refusal(r);
  const data = new Uint8Array(await r.arrayBuffer());
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  if (!equalBytes(digest, ref.sha256)) throw new MediaRefused(502, "the downloaded bytes do not match the reference's SHA-256");
  return new Blob([data], { type: ref.mime || "application/octet-stream" });
}
