/**
 * MEDIA messages in the timeline (issue 40; docs/sdk.md "The web page's media"): an
 * image's inline thumbnail, drawn from the signed MediaRef the message carries (no
 * network), above the row's "[photo: name, W×H, size]" line; a file gets an "open"
 * button. A click fetches the original through the message (client.download's rule:
 * GET /v1/media/{id} with the device's token, checked against the reference's SHA-256;
 * decision 0138) into an object URL: an image opens in a viewer over the page, any other
 * file is saved under its name. Refusals (403, 410 recalled ...) are shown as an error.
 */

import { fromHex, toHex } from "../sdk/bytes";
import type { Client } from "../sdk/client";
import { decodeRef, fetchMedia } from "../sdk/media";
import type { MediaRef } from "../gen/qim/v1/media_pb";
import type { Row } from "./rows";
import { refusalWords } from "./uploads";

const thumbs = new Map<string, string>(); // media_id -> data: URL of its thumbnail (drawn once)

function thumbUrl(ref: MediaRef): string {
  let url = thumbs.get(ref.mediaId);
  if (!url) {
    let bin = "";
    for (const b of ref.thumbnail) bin += String.fromCharCode(b);
    url = `data:image/webp;base64,${btoa(bin)}`; // the service makes WebP thumbnails (decision 0138)
    thumbs.set(ref.mediaId, url);
  }
  return url;
}

/** The media part of row `r` of conversation `conv` (hex): a thumbnail or an "open" button; none for other rows. */
export function mediaParts(client: Client, conv: string | null, r: Row, showError: (m: string) => void): HTMLElement[] {
  if (!r.media?.length || !conv || (r.state !== "sent" && r.state !== "pending" && r.state !== "failed")) return [];
  let ref: MediaRef;
  try {
    ref = decodeRef(r.media);
  } catch {
    return []; // the row's words say "[media: unreadable reference]"
  }
  const openable = r.state === "sent" && r.messageId !== null;
  const open = () => {
    if (openable) void openMedia(client, conv, r.messageId!, ref, showError);
  };
  if (ref.thumbnail.length) {
    const img = document.createElement("img");
    Object.assign(img, { className: "thumb", src: thumbUrl(ref), alt: ref.name || "photo" });
    Object.assign(img.dataset, { testid: "media-thumb", media: ref.mediaId });
    if (ref.width && ref.height) img.style.aspectRatio = `${ref.width} / ${ref.height}`;
    img.title = openable ? "open the full image" : "not sent yet";
    img.onclick = open;
    return [img];
  }
  const b = document.createElement("button");
  Object.assign(b, { type: "button", className: "link", textContent: "open", disabled: !openable });
  Object.assign(b.dataset, { testid: "media-open", media: ref.mediaId });
  b.onclick = open;
  return [b];
}

/** Fetch the original of `ref` (message `messageId` of `conv`, hex) and show or save it. */
export async function openMedia(client: Client, conv: string, messageId: string, ref: MediaRef,
  showError: (m: string) => void): Promise<void> {
  let blob: Blob;
  try {
    const peer = (await client.conversation(fromHex(conv)))?.peerUserId ?? 0n;
    blob = await fetchMedia(client.mediaUrl, await client.runtime.currentToken(), ref, fromHex(conv),
      fromHex(messageId), peer, client.mediaHttp);
  } catch (e) {
    showError(`open: ${refusalWords(e)}`);
    return;
  }
  const url = URL.createObjectURL(blob);
  if (ref.mime.startsWith("image/")) return viewer(url, ref);
  const a = document.createElement("a");
  Object.assign(a, { href: url, download: ref.name || `file-${toHex(ref.sha256).slice(0, 8)}` });
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 60_000); // the download has the bytes by then
}

/** The full image over the page; closed by its button, a click on the backdrop or Escape (the URL freed). */
function viewer(url: string, ref: MediaRef): void {
  document.getElementById("media-viewer")?.remove();
  const box = document.createElement("div");
  Object.assign(box, { id: "media-viewer", className: "viewer" });
  box.dataset.testid = "media-viewer";
  const img = document.createElement("img");
  Object.assign(img, { src: url, alt: ref.name || "photo" });
  Object.assign(img.dataset, { testid: "media-full", media: ref.mediaId });
  const bar = document.createElement("div");
  const save = document.createElement("a");
  Object.assign(save, { href: url, download: ref.name || "photo", textContent: "save" });
  save.dataset.testid = "media-save";
  const close = document.createElement("button");
  Object.assign(close, { type: "button", textContent: "close" });
  close.dataset.testid = "media-close";
  bar.append(ref.name || "", " ", save, " ", close);
  box.append(img, bar);
  const shut = () => {
    box.remove();
    URL.revokeObjectURL(url);
    document.removeEventListener("keydown", esc);
  };
  const esc = (ev: KeyboardEvent) => ev.key === "Escape" && shut();
  close.onclick = shut;
  // a block, never `ev.target === box && shut()`: a handler property that returns false
  // cancels the click, and every click inside bubbles here (the save link's download was lost)
  box.onclick = (ev) => {
    if (ev.target === box) shut();
  };
  document.addEventListener("keydown", esc);
  document.body.append(box);
}
