/**
 * A media send from upload to pending MEDIA send, through the media outbox
 * (mediaoutbox.ts): `sendMediaOnce` is client.sendMedia's body, `resumeMediaSends` what
 * client.resumeMedia runs at the next start (issue 40: pending media sends survive a
 * reload like pending text).
 */

import type { SendAck } from "./events";
import { IMAGE_TYPES, MediaRefused, sniff, upload, type MediaHttp, type Progress } from "./media";
import { forgetMedia, handedOn, mediaRows, recordMedia, uploadedMedia } from "./mediaoutbox";
import { LARGE_BYTES, uploadParts } from "./mediaparts";
import { MessageType } from "./protocol";
import type { LocalStore } from "./store";

/** What of the Client a media send uses (client.ts passes itself). */
export interface MediaClient {
  readonly mediaUrl: string;
  readonly mediaHttp: MediaHttp;
  readonly store: LocalStore;
  readonly runtime: { currentToken(): Promise<string> };
  send(conv: Uint8Array, body: Uint8Array, messageType: number, customType: Uint8Array<ArrayBuffer>,
    wait: boolean): Promise<SendAck | Uint8Array>;
}

export interface MediaOpts {
  name?: string;
  mime?: string;
  keepMetadata?: boolean;
  progress?: Progress;
}

/** Refusals the same bytes would meet again: the row is dropped, never retried by itself. */
const FINAL = new Set([400, 403, 404, 410, 413, 415, 422]);

async function finish(c: MediaClient, id: string, conv: Uint8Array, file: Blob | Uint8Array, opts: MediaOpts,
  ref: Uint8Array | null, wait: boolean): Promise<SendAck | Uint8Array> {
  let body = ref;
  if (!body) {
    const data = file instanceof Uint8Array ? file : new Uint8Array(await file.arrayBuffer());
    const token = await c.runtime.currentToken(), mime = opts.mime || sniff(data);
    const parts = data.length > LARGE_BYTES && !(IMAGE_TYPES as readonly string[]).includes(mime); // mediaparts.ts
    const up = parts ? await uploadParts(c.mediaUrl, token, data, { ...opts, mime }, c.mediaHttp)
      : await upload(c.mediaUrl, token, data, opts, c.mediaHttp);
    body = up.body;
    await uploadedMedia(c.store, id, body); // a reload from here on sends this reference, not a new upload
  }
  const out = await c.send(conv, body, MessageType.MEDIA, new Uint8Array(0), wait);
  await forgetMedia(c.store, id); // the MEDIA send is pending now: it survives as text does
  return out;
}

/** Record, upload, send (client.sendMedia). A failure removes the row and is thrown: the
 * app shows it (the page: Retry or Remove), and nothing is sent later behind its back. */
export async function sendMediaOnce(c: MediaClient, conv: Uint8Array, file: Blob | Uint8Array, opts: MediaOpts,
  wait: boolean): Promise<SendAck | Uint8Array> {
  const name = opts.name ?? "";
  const id = await recordMedia(c.store, { conversationId: conv, data: file, name, mime: opts.mime ?? "",
    keepMetadata: !!opts.keepMetadata });
  try {
    return await finish(c, id, conv, file, { ...opts, name }, null, wait);
  } catch (e) {
    await forgetMedia(c.store, id);
    throw e;
  }
}

/** Finish every media send a reload cut (client.resumeMedia): [name, outcome] each, the
 * outcome the send's cmid or the error that ended it. A final refusal (400, 403, 404, 410,
 * 413, 415, 422) drops the row; any other error keeps it for the next call. */
export async function resumeMediaSends(c: MediaClient): Promise<[string, Uint8Array | Error][]> {
  const out: [string, Uint8Array | Error][] = [];
  for (const row of await mediaRows(c.store)) {
    if (await handedOn(c.store, row)) {
      await forgetMedia(c.store, row.id); // sent before the reload: its pending send carries on
      continue;
    }
    try {
      const sent = await finish(c, row.id, row.conversationId, row.data, { name: row.name, mime: row.mime || undefined,
        keepMetadata: row.keepMetadata }, row.ref, false);
      out.push([row.name, sent as Uint8Array]);
    } catch (e) {
      if (e instanceof MediaRefused && FINAL.has(e.status)) await forgetMedia(c.store, row.id);
      out.push([row.name, e as Error]);
    }
  }
  return out;
}
