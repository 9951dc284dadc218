/**
 * Pin, mute and hide from the conversation list, and read ticks in direct chats, on the
 * page (qim-js convstate.ts; docs/sdk.md "Pin, mute, hide", "Read receipts"). The list
 * order and every mark come from qim-js events (conversationState, peerRead); a click
 * only asks the server, and the answer's event redraws.
 */

import type { Client } from "../sdk/client";
import { isMuted } from "../sdk/convstate";
import { KIND_GROUP } from "../sdk/ids";
import type { Conversation } from "../sdk/model";
import type { Row } from "./rows";

function button(text: string, testid: string, act: () => Promise<unknown>, fail: (m: string) => void): HTMLElement {
  const b = document.createElement("button");
  b.className = "link";
  b.textContent = text;
  b.setAttribute("data-testid", testid);
  b.onclick = (ev) => {
    ev.stopPropagation(); // the row's click opens the conversation
    act().catch((e) => fail(`${text} failed: ${(e as Error).message}`));
  };
  return b;
}

/** The list as shown: pinned first, hidden left out (newest first within each part). */
export function shapeList(client: Client, newestFirst: Conversation[]): Conversation[] {
  return client.convstates.shape(newestFirst);
}

/** Marks and buttons of one list row: 📌 pinned, 🔕 muted, @ mentioned; pin, mute, hide;
 * in one line of their own under the row's preview (style.css `.conv .tools`: the row is
 * a two-column grid, and loose cells fell into both columns, a newcomer saw them zigzag). */
export function convControls(client: Client, c: Conversation, fail: (m: string) => void): HTMLElement[] {
  const tools = document.createElement("div");
  tools.className = "tools";
  tools.append(...convParts(client, c, fail));
  return [tools];
}

function convParts(client: Client, c: Conversation, fail: (m: string) => void): HTMLElement[] {
  const s = client.convstates.get(c.conversationId);
  const muted = isMuted(s);
  const marks = document.createElement("span");
  marks.className = "marks";
  marks.setAttribute("data-testid", "conversation-marks");
  marks.setAttribute("data-pinned", String(s.pinned));
  marks.setAttribute("data-muted", String(muted));
  marks.setAttribute("data-mentioned", String(s.mentioned));
  marks.textContent = (s.pinned ? "📌" : "") + (muted ? "🔕" : "") + (s.mentioned ? "@" : "");
  const conv = c.conversationId;
  return [marks,
    button(s.pinned ? "unpin" : "pin", "conversation-pin", () => client.convstates.pin(conv, !s.pinned), fail),
    button(muted ? "unmute" : "mute", "conversation-mute",
      () => (muted ? client.convstates.unmute(conv) : client.convstates.mute(conv)), fail),
    button("hide", "conversation-hide", () => client.convstates.hide(conv), fail)];
}

/** A read tick for one of my sent rows of a direct chat the peer read ("" otherwise). */
export function readMark(client: Client, open: Conversation | undefined, r: Row): HTMLElement[] {
  if (!open || open.kind === KIND_GROUP || r.seq === null || r.senderId !== client.userId) return [];
  if (client.convstates.get(open.conversationId).peerReadSeq < r.seq) return [];
  const tick = document.createElement("span");
  tick.className = "read";
  tick.textContent = "✓✓ read";
  tick.setAttribute("data-testid", "message-read");
  return [tick];
}
