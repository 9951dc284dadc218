/**
 * Replies, mentions and edits on the page (docs/decisions/0120; docs/sdk.md "qim-js"):
 * every committed message offers "reply" (the composer shows what is replied to, with a
 * ✕ to drop it; the server quotes it, shown above the reply's text, "message recalled"
 * when it was); my last sent message offers "edit" (its text goes into the composer,
 * Enter saves it as a new version, the banner's ✕ gives up); an edited message says "edited".
 * `@name` in the composer mentions the member of that display name (or user id),
 * `@all` everyone; typing `@` offers the names known on the page to complete.
 */

import type { Client } from "../sdk/client";
import type { SendExtras } from "../sdk/model";
import { fromHex } from "../sdk/bytes";
import type { Row } from "./rows";

interface Draft {
  replyTo: { mid: string; preview: string } | null;
  editing: string | null; // message id whose text is in the composer
}
const draft: Draft = { replyTo: null, editing: null };

function node(tag: string, cls: string, text: string, testid: string): HTMLElement {
  const e = document.createElement(tag);
  e.className = cls;
  e.textContent = text;
  e.dataset.testid = testid;
  return e;
}

function composer(): HTMLTextAreaElement {
  return (document.getElementById("composer") as HTMLFormElement).elements.namedItem("text") as HTMLTextAreaElement;
}

/** The banner above the composer: what the next send replies to or which message it edits. */
function banner(): void {
  const form = document.getElementById("composer") as HTMLFormElement;
  let b = document.getElementById("draft-banner");
  const what = draft.editing ? "editing your message" : draft.replyTo ? `replying to: ${draft.replyTo.preview}` : "";
  if (!what) return b?.remove();
  if (!b) {
    b = node("div", "draft", "", "draft-banner");
    b.id = "draft-banner";
    form.prepend(b);
  }
  const drop = node("button", "link", "✕", "draft-cancel");
  drop.onclick = (ev) => { ev.preventDefault(); if (draft.editing) composer().value = ""; clear(); };
  b.replaceChildren(node("span", "", what, "draft-what"), drop);
}

function clear(): void {
  draft.replyTo = draft.editing = null;
  banner();
}

/** The quote of a reply ([] for a message that replies to nothing). */
export function quoteOf(r: Row, nameOf: (user: bigint) => string): HTMLElement[] {
  if (!r.reply) return [];
  const text = r.reply.state !== 0 ? "message recalled" : r.reply.preview || "(attachment)";
  const q = node("div", "quote", `↩ ${nameOf(r.reply.senderId)}: ${text}`, "reply-quote");
  q.dataset.replyTo = r.reply.messageId;
  return [q];
}

/** "edited" and the reply / edit buttons of a row (`lastOwn`: my newest sent message; no edit for a photo or file). */
export function msgActions(r: Row, lastOwn: boolean): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (r.edited) out.push(node("span", "edited", "edited", "edited"));
  if (r.state !== "sent" || !r.messageId) return out;
  const reply = node("button", "link", "reply", "reply");
  reply.onclick = () => {
    draft.editing = null;
    draft.replyTo = { mid: r.messageId!, preview: r.text.slice(0, 80) };
    banner();
    composer().focus();
  };
  out.push(reply);
  if (lastOwn && !r.media) { // the server refuses to edit a MEDIA message (FORBIDDEN: send another)
    const edit = node("button", "link", "edit", "edit-message");
    edit.onclick = () => {
      draft.replyTo = null;
      draft.editing = r.messageId;
      composer().value = r.text;
      banner();
      composer().focus();
    };
    out.push(edit);
  }
  return out;
}

/**
 * The user ids `@name` / `@id` / `@all` in `text` name (by the display names known here).
 * A name counts where it ends: the text's end, a space or punctuation of any script
 * ("@张三，明天见"), or anything after a name ending in a CJK character ("@张三你好": those
 * scripts put no space after a name); the longest such name wins ("@Bobby" is not "Bob").
 * The same rule as qim-desktop's (qim/desktop/replies.py mentions_in).
 */
export function mentionsIn(text: string, names: Map<string, string>): { mentions: bigint[]; mentionAll: boolean } {
  const ids = new Set<bigint>();
  let all = false;
  const known = [...names].filter(([, n]) => n && !/\s/.test(n)).sort((x, y) => y[1].length - x[1].length);
  for (const [, word] of text.matchAll(/@(\S+)/g)) {
    const digits = /^\d+/.exec(word)?.[0];
    if (word.startsWith("all") && endsName("all", word.slice(3))) all = true;
    else if (digits && endsName("0", word.slice(digits.length))) ids.add(BigInt(digits));
    else {
      const hit = known.find(([, n]) => word.startsWith(n) && endsName(n, word.slice(n.length)));
      if (hit) ids.add(BigInt(hit[0]));
    }
  }
  return { mentions: [...ids], mentionAll: all };
}

/** Whether a mentioned name may end where `rest` begins (see mentionsIn). */
function endsName(name: string, rest: string): boolean {
  if (!rest || /^[\p{P}\p{S}\p{Z}]/u.test(rest)) return true;
  return /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\u3000-\u303f\uff00-\uffef]$/u.test(name);
}

/** Enter in the composer: the edit being made, else a send with the draft's reply and the text's mentions. */
export async function submitDraft(client: Client, conv: string, text: string, names: Map<string, string>): Promise<void> {
  const editing = draft.editing, replyTo = draft.replyTo;
  clear();
  // A refusal (an edit FORBIDDEN: too old, recalled meanwhile; a send refused before it
  // was stored) keeps the draft as it was, banner included, unless another was started
  // meanwhile: the text goes back (view.ts), and Enter must not turn a refused edit into
  // a new message, nor drop what a reply answered.
  const keep = (e: unknown): never => {
    if (!draft.editing && !draft.replyTo) Object.assign(draft, { editing, replyTo }), banner();
    throw e;
  };
  if (editing) {
    await client.edit(fromHex(conv), fromHex(editing), text).catch((e) => keep(
      new Error(`the edit was refused: ${(e as Error).message} (your text is kept; ✕ above it gives up the edit)`)));
    return;
  }
  const extras: SendExtras = { ...mentionsIn(text, names), ...(replyTo ? { replyTo: fromHex(replyTo.mid) } : {}) };
  await client.sendText(fromHex(conv), text, false, extras).catch(keep);
}

/** `@` completion: a datalist-like list of the names known on the page, filled as one types. */
export function completeMentions(ta: HTMLTextAreaElement, names: Map<string, string>): void {
  ta.addEventListener("input", () => {
    const m = /@(\S*)$/.exec(ta.value.slice(0, ta.selectionStart ?? ta.value.length));
    document.getElementById("mention-list")?.remove();
    if (!m) return;
    const hits = [...names.values(), "all"].filter((n) => n.startsWith(m[1])).slice(0, 8);
    if (!hits.length) return;
    const ul = node("ul", "mentions", "", "mention-list");
    ul.id = "mention-list";
    for (const name of hits) {
      const li = node("li", "", name, "mention-option");
      li.onclick = () => {
        ta.value = ta.value.slice(0, m.index) + `@${name} ` + ta.value.slice(m.index + m[0].length);
        ul.remove();
        ta.focus();
      };
      ul.append(li);
    }
    ta.parentElement?.append(ul);
  });
}
