/**
 * Reactions and typing on the page (qim-js reactions.ts; docs/sdk.md "Reactions and
 * typing"; docs/decisions/0121). Under each sent message its reactions are buttons
 * ("👍 2"; yours highlighted): a click takes yours away or adds it; "☺+" offers a few
 * emoji to add. Summaries come from the open chat's newest history page and then from
 * the live "reactions" events, and what is drawn is qim-js's newest (`reactions.known`: the
 * highest version, so an out-of-order reply or event never shows an older one); the header says "… is typing…" from the "typing" events,
 * and typing in the composer tells the chat's other members (qim-js sends at most one
 * every 2 s).
 */

import type { Client } from "../sdk/client";
import { fromHex, toHex } from "../sdk/bytes";
import type { ReactionCount } from "../sdk/events";
import type { Row } from "./rows";

/** The emoji the "☺+" button offers. */
export const PICKS = ["👍", "❤️", "😂", "🎉", "😮", "😢"];

const summaries = new Map<string, ReactionCount[]>(); // message id hex -> its reactions

/** Keep a live event's summary (the caller redraws). */
export function noteReaction(messageId: Uint8Array, summary: ReactionCount[]): void {
  summaries.set(toHex(messageId), summary);
}

/** The open chat's newest page of reactions (a failure is told, never thrown). */
export async function loadReactions(client: Client, conv: Uint8Array, fail: (m: string) => void): Promise<void> {
  try {
    for (const [mid, s] of await client.reactions.summaries(conv)) summaries.set(mid, s);
  } catch (e) {
    fail(`reactions: ${(e as Error).message}`);
  }
}

function chip(text: string, testid: string, act: () => Promise<unknown>, fail: (m: string) => void): HTMLButtonElement {
  const b = document.createElement("button");
  b.className = "link reaction";
  b.textContent = text;
  b.setAttribute("data-testid", testid);
  b.onclick = () => void act().then((s) => s, (e) => fail(`reaction failed: ${(e as Error).message}`));
  return b;
}

/** The reactions line of one row ([] for a row not sent yet, recalled or deleted). */
export function reactionBar(client: Client, open: string | null, r: Row, fail: (m: string) => void,
                            redraw: () => void): HTMLElement[] {
  if (!open || !r.messageId || r.state !== "sent") return [];
  const conv = fromHex(open);
  const mid = fromHex(r.messageId);
  const bar = document.createElement("div");
  bar.className = "reactions";
  bar.setAttribute("data-testid", "message-reactions");
  const keep = (s: ReactionCount[]) => { summaries.set(r.messageId!, client.reactions.known(mid) ?? s); redraw(); };
  for (const c of client.reactions.known(mid) ?? summaries.get(r.messageId) ?? []) {
    const b = chip(`${c.emoji} ${c.count}`, "reaction", () => (c.mine ? client.reactions.remove(conv, mid, c.emoji)
      : client.reactions.add(conv, mid, c.emoji)).then(keep), fail);
    b.dataset.emoji = c.emoji;
    b.dataset.mine = String(c.mine);
    if (c.mine) b.classList.add("mine");
    bar.append(b);
  }
  const picker = document.createElement("span");
  picker.className = "picks";
  picker.hidden = true;
  for (const e of PICKS) {
    const b = chip(e, "reaction-pick", () => client.reactions.add(conv, mid, e).then(keep), fail);
    b.dataset.emoji = e;
    picker.append(b);
  }
  const more = document.createElement("button");
  more.className = "link";
  more.textContent = "☺+";
  more.setAttribute("data-testid", "react");
  more.onclick = () => { picker.hidden = !picker.hidden; };
  bar.append(more, picker);
  return [bar];
}

/** " · Bob is typing…" for the open chat ("" when nobody is). */
export function typingWords(client: Client, open: string | null, nameOf: (u: bigint) => string): string {
  if (!open) return "";
  const who = client.reactions.typingIn(fromHex(open)).map(nameOf);
  return who.length ? ` · ${who.join(", ")} ${who.length === 1 ? "is" : "are"} typing…` : "";
}

/** The person typed in the composer: tell the open chat (best effort; qim-js limits the rate). */
export function typed(client: Client, open: string | null, text: string): void {
  if (!open || !text.trim() || !client.runtime.connected) return;
  void client.reactions.typing(fromHex(open)).catch(() => undefined);
}
