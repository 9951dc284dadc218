/**
 * Large files in presigned parts (qim-js; the counterpart of qim.sdk's media_parts;
 * docs/decisions/0138 amendment; docs/sdk.md "Media"). A file above LARGE_BYTES that is
 * not an image (images always pass the service, which strips their metadata) is declared
 * to the MediaService (`POST /v1/media/uploads` {size, sha256, mime, name} with the
 * device's token: quota and limits checked there), its parts are PUT straight to the
 * object store at the presigned URLs the service answered, and `complete` makes the
 * service join them, read the object back, check its SHA-256 and type and answer the
 * signed reference, exactly as `POST /v1/media` does.
 *
 * A part that fails (network, an expired URL) is not the end: after a bounded, jittered
 * pause the client asks the upload's status (`GET /v1/media/uploads/{upload}`: the parts
 * the store holds and fresh URLs for the others, from any node) and sends only what is
 * missing, PART_TRIES rounds at most; then the last error is thrown. Refusals are
 * MediaRefused (status and reason) as in media.ts; 0 when nothing answered.
 */

import { b64decode, decodeRef, MediaRefused, refusal, sha256Hex, sniff, type MediaHttp, type Progress,
  type Uploaded } from "./media";

/** Above this many bytes a file that is not an image goes in parts (qim.sdk's LARGE_BYTES: the service's default limit). */
export const LARGE_BYTES = 16 * 1024 * 1024;
/** Rounds of sending the missing parts before the upload is given up (the error thrown). */
export const PART_TRIES = 4;
const PAUSE_MS = [500, 2000, 8000]; // before each further round, jittered by ±50 %

/** The service's answer about an upload (start and status). */
interface UploadState {
  upload: string;
  part_bytes: number;
  parts: number;
  received?: number[];
  urls: Record<string, string>;
}

type Put = (url: string, chunk: Uint8Array, sent: (bytes: number) => void) => Promise<void>;

/** PUT one part: XMLHttpRequest in a browser (its progress told), else `fetch`; MediaRefused on failure. */
function putPart(http: MediaHttp): Put {
  if (!http.fetch && typeof XMLHttpRequest !== "undefined") {
    return (url, chunk, sent) => new Promise((resolve, reject) => {
      const x = new XMLHttpRequest();
      x.open("PUT", url);
      x.upload.onprogress = (e) => sent(e.loaded);
      x.onload = () => (x.status >= 200 && x.status < 300 ? (sent(chunk.length), resolve())
        : reject(new MediaRefused(x.status, `the object store refused a part: ${x.status}`)));
      x.onerror = () => reject(new MediaRefused(0, "the object store could not be reached"));
      x.send(new Blob([new Uint8Array(chunk)]));
    });
  }
  return async (url, chunk, sent) => {
    let r: Response;
    try {
      r = await (http.fetch ?? fetch)(url, { method: "PUT", body: new Blob([new Uint8Array(chunk)]) });
    } catch {
      throw new MediaRefused(0, "the object store could not be reached");
    }
    if (!r.ok) throw new MediaRefused(r.status, `the object store refused a part: ${r.status}`);
    sent(chunk.length);
  };
}

/**
 * Upload `data` in presigned parts as the device of `token` (module doc); `mime`
 * defaults to the type sniffed from the bytes. `progress(sent, total)` counts the
 * bytes of the parts sent (a part sent again counts once). `sleep` is the pause between
 * rounds (a fake in unit tests). The reference, or MediaRefused.
 */
export async function uploadParts(mediaUrl: string, token: string, data: Uint8Array,
  opts: { mime?: string; name?: string; progress?: Progress } = {}, http: MediaHttp = {},
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms))): Promise<Uploaded> {
  const base = `${mediaUrl.replace(/\/+$/, "")}/v1/media/uploads`;
  const auth = { Authorization: `Bearer ${token}` };
  const ask = async <T>(url: string, init: RequestInit): Promise<T> => {
    let r: Response;
    try {
      r = await (http.fetch ?? fetch)(url, init);
    } catch {
      throw new MediaRefused(0, "the media service could not be reached");
    }
    if (r.status !== 200 && r.status !== 201) throw await refusal(r);
    return (await r.json()) as T;
  };
  const spec = { size: data.length, sha256: await sha256Hex(data), mime: opts.mime || sniff(data), name: opts.name ?? "" };
  let state = await ask<UploadState>(base, { method: "POST", headers: { ...auth, "Content-Type": "application/json" },
    body: JSON.stringify(spec) });
  const sizeOf = (n: number) => Math.min(state.part_bytes, data.length - (n - 1) * state.part_bytes);
  const sent = new Map<number, number>();
  const tell = () => opts.progress?.([...sent.values()].reduce((a, b) => a + b, 0), data.length);
  const put = putPart(http);
  for (let round = 1; ; round++) {
    let failure: unknown = null;
    for (const [n, url] of Object.entries(state.urls).sort((a, b) => Number(a[0]) - Number(b[0]))) {
      const part = Number(n), start = (part - 1) * state.part_bytes;
      try {
        await put(url, data.subarray(start, start + sizeOf(part)), (b) => { sent.set(part, b); tell(); });
      } catch (e) {
        sent.delete(part);
        failure = e; // the others are still sent: fewer to send again
      }
    }
    if (failure === null) break;
    if (round >= PART_TRIES) throw failure;
    const pause = PAUSE_MS[Math.min(round - 1, PAUSE_MS.length - 1)];
    await sleep(pause * (0.5 + Math.random()));
    state = await ask<UploadState>(`${base}/${state.upload}`, { headers: auth }); // what arrived; fresh URLs for the rest
    for (const n of state.received ?? []) sent.set(n, sizeOf(n));
    tell();
  }
  const done = await ask<{ ref: string }>(`${base}/${state.upload}/complete`, { method: "POST", headers: auth });
  const body = b64decode(done.ref);
  return { ref: decodeRef(body), body };
}
