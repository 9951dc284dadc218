/**
 * A text refused for good after it left the composer (docs/sdk.md "qim-js", the page):
 * with a send policy the server answers ERROR POLICY_REFUSED (docs/decisions/0099) after
 * the composer was emptied, and the SDK marks the row failed with its body kept
 * (sendFailed). What a person chatting expects: the text goes back into the composer to
 * be edited when the composer is empty (nothing typed since is replaced); otherwise the
 * failed row offers "edit", which puts it back before what was typed. The reason stays
 * on the red row ("failed: POLICY_REFUSED: …"); nothing is sent again by itself: Enter
 * sends the edited text as a new message. A send held or lost for a passing reason is
 * retried by the SDK and never comes here.
 */

import { toHex } from "../sdk/bytes";
import type { Row } from "./rows";

const back = new Set<string>(); // rows (by key) whose text went back into the composer

function composer(): HTMLTextAreaElement {
  const form = document.getElementById("composer") as HTMLFormElement;
  return form.elements.namedItem("text") as HTMLTextAreaElement;
}

/** Put `text` back: the whole composer when it is empty, else before what was typed. */
function putBack(key: string, text: string): void {
  const ta = composer();
  ta.value = ta.value.trim() ? `${text}\n${ta.value}` : text;
  back.add(key);
  ta.focus();
  ta.setSelectionRange(text.length, text.length);
}

/** sendFailed of a row shown (`row`, by its client_message_id): back into an empty composer. */
export function refused(row: Row | undefined, cmid: Uint8Array): void {
  const key = toHex(cmid);
  if (row && row.key === key && row.state === "failed" && !composer().value.trim()) putBack(key, row.text);
}

/** The "edit" link of a failed row whose text is not back in the composer yet (none otherwise). */
export function editLink(r: Row, redraw: () => void): HTMLElement[] {
  if (r.state !== "failed" || back.has(r.key)) return [];
  const b = document.createElement("button");
  b.className = "link";
  b.textContent = "edit";
  b.dataset.testid = "edit";
  b.title = "put the text back into the composer";
  b.onclick = () => { putBack(r.key, r.text); redraw(); };
  return [b];
}
