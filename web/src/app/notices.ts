/**
 * Words for what is not plain text (a newcomer's first hour, H7): a CONTROL notice as the
 * list's preview ("(a message was recalled)" in a direct chat, never "(group change)"),
 * and a MEDIA message as its kind, name, pixels and size read from the signed reference
 * it carries (docs/sdk.md "Media"), never the reference's bytes, which are binary. The
 * same words as qim-desktop's (qim/desktop/render.py describe_control, media_words).
 */

import { fromBinary } from "@bufbuild/protobuf";
import { MediaRefSchema } from "../gen/qim/v1/media_pb";
import { ControlEventSchema } from "../gen/qim/v1/message_pb";
import { humanSize } from "../sdk/media";
import { MessageState } from "../sdk/protocol";

const KINDS: Record<string, string> = { image: "photo", video: "video", audio: "voice note" };

/** The list's preview of a CONTROL message body (a ControlEvent); "(group change)" for one that does not decode. */
export function controlPreview(body: Uint8Array): string {
  try {
    const ev = fromBinary(ControlEventSchema, body).event;
    if (ev.case === "stateChange") {
      return ev.value.state === MessageState.DELETED ? "(a message was deleted)" : "(a message was recalled)";
    }
    if (ev.case === "edit") return "(a message was edited)";
  } catch {
    // a garbled notice is still a notice: the generic words below
  }
  return "(group change)";
}

/** Bytes as a person reads them: "512 B", "8.0 KiB", "17.0 MiB" (qim-js's humanSize). */
export const sizeWords = humanSize;

/**
 * A MEDIA body in words, e.g. "[photo: beach.jpg, 800×600, 8.0 KiB]"; "[media]" for an
 * empty body (a list head above 4 KiB is stored without its body: a large thumbnail);
 * "[media: unreadable reference]" when it does not decode.
 */
export function mediaWords(body: Uint8Array): string {
  if (body.length === 0) return "[media]";
  try {
    const ref = fromBinary(MediaRefSchema, body);
    const parts = ref.name ? [ref.name] : [];
    if (ref.width && ref.height) parts.push(`${ref.width}×${ref.height}`);
    if (ref.durationMs) parts.push(`${(ref.durationMs / 1000).toFixed(0)} s`);
    parts.push(sizeWords(ref.size));
    return `[${KINDS[ref.mime.split("/")[0]] ?? "file"}: ${parts.join(", ")}]`;
  } catch {
    return "[media: unreadable reference]";
  }
}
