/**
 * The page's pending uploads (issue 40; docs/sdk.md "The web page's media"): a file
 * attached, dropped or pasted is an Upload of one conversation until the MediaService
 * accepted it and its MEDIA message is stored as a pending send (from then on the row of
 * the send shows it, sendPending). While uploading it has a progress (bytes sent of all);
 * refused, it stays with the service's status and reason in words, to be tried again or
 * removed by the person: an upload is never dropped silently. Only a refusal that can pass
 * later (retryable: the network, the daily quota, the service down) is offered a retry; one
 * that never can (400 bad file, 403, 404, 410, 413 too big, 415 type, 422 image) only a
 * removal. Sizes are in KiB/MiB, the units of the service's refusals and of the message
 * rows (notices.ts sizeWords). Pure: no DOM (unit-tested in test/uploads.test.ts).
 */

import { MediaRefused } from "../sdk/media";
import { sizeWords } from "./notices";

export type UploadState = "uploading" | "failed";

/** One attached file on its way. */
export interface Upload {
  id: number;
  conversation: string; // hex id: the conversation open when it was attached
  file: Blob;
  name: string;
  size: number;
  sent: number; // bytes of the body sent so far (progress)
  state: UploadState;
  failure: string; // what went wrong, in words ("" while uploading)
  retryable: boolean; // failed, and a retry could pass (retryable(e)); false while uploading
}

/**
 * Whether an upload refused with `e` may pass when tried again: the service unreachable
 * (status 0), the sign-in expired (401), a timeout (408), the daily quota (429: it renews
 * the next day), the service or store failing (5xx, 503 MediaUnavailable). Any other
 * MediaRefused (400, 403, 404, 410, 413, 415, 422 ...) says what is wrong with the file or
 * the conversation: the same bytes are refused again. Another error (the MEDIA send after
 * the upload, e.g. the connection closing) is treated as transient.
 */
export function retryable(e: unknown): boolean {
  if (!(e instanceof MediaRefused)) return true;
  return e.status === 0 || e.status === 401 || e.status === 408 || e.status === 429 || e.status >= 500;
}

/** Words for a refusal of the MediaService (an upload's or a download's; any other error too), safe to show. */
export function refusalWords(e: unknown): string {
  if (!(e instanceof MediaRefused)) return `not sent: ${e instanceof Error ? e.message : String(e)}`;
  const why: Record<number, string> = {
    0: "the media service could not be reached (retry when online)",
    400: "file refused",
    401: "not signed in any more (sign in again, then retry)",
    403: "not a member of this conversation",
    404: "not found (a message this device cannot see, or a file that is gone)",
    410: "recalled or deleted",
    413: "file too big",
    415: "file type not allowed, or not what its bytes are",
    422: "image refused",
    429: "daily upload quota reached (it renews tomorrow; retry then)",
    503: "the media service is unavailable now (retry later)",
  };
  const head = why[e.status] ?? `refused (${e.status})`;
  return e.reason && e.status !== 0 ? `${head}: ${e.reason}` : head;
}

/** The uploads of one page, oldest first. `changed` is called after every change. */
export class Uploads {
  private items: Upload[] = [];
  private next = 1;

  constructor(private readonly changed: () => void = () => undefined) {}

  /** Add `file` (named `name`, or the File's own name, else "pasted image") for `conversation`. */
  add(conversation: string, file: Blob, name = ""): Upload {
    const fileName = name || (typeof File !== "undefined" && file instanceof File ? file.name : "") || "pasted image";
    const up: Upload = { id: this.next++, conversation, file, name: fileName, size: file.size, sent: 0,
      state: "uploading", failure: "", retryable: false };
    this.items.push(up);
    this.changed();
    return up;
  }

  /** Progress of `id`: `sent` of `total` bytes (never backwards, never past the size). */
  progress(id: number, sent: number, total: number): void {
    const up = this.get(id);
    if (!up || up.state !== "uploading") return;
    up.size = total || up.size;
    up.sent = Math.min(Math.max(up.sent, sent), up.size);
    this.changed();
  }

  /** `id` failed with `e`: kept, with its reason, for a retry or a removal. */
  failed(id: number, e: unknown): void {
    const up = this.get(id);
    if (!up) return;
    Object.assign(up, { state: "failed", failure: refusalWords(e), retryable: retryable(e) });
    this.changed();
  }

  /** Try `id` again (a failed, retryable one): uploading from the start. The Upload, or undefined. */
  retry(id: number): Upload | undefined {
    const up = this.get(id);
    if (!up || up.state !== "failed" || !up.retryable) return undefined;
    Object.assign(up, { state: "uploading", failure: "", sent: 0, retryable: false });
    this.changed();
    return up;
  }

  /** `id` is gone: accepted and sent (its row shows it now) or removed by the person. */
  done(id: number): void {
    this.items = this.items.filter((u) => u.id !== id);
    this.changed();
  }

  /** The uploads of `conversation` (hex), oldest first. */
  of(conversation: string | null): Upload[] {
    return this.items.filter((u) => u.conversation === conversation);
  }

  /** The upload `id`, if still there. */
  get(id: number): Upload | undefined {
    return this.items.find((u) => u.id === id);
  }
}

/** "beach.jpg · 340.0 KiB of 1.2 MiB" while uploading, "beach.jpg · 1.2 MiB" otherwise (binary units, as the message rows). */
export function uploadWords(up: Upload): string {
  return up.state === "uploading" && up.sent < up.size
    ? `${up.name} · ${sizeWords(up.sent)} of ${sizeWords(up.size)}`
    : `${up.name} · ${sizeWords(up.size)}`;
}
