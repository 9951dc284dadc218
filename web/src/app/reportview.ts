/**
 * Reporting a message from the page (issue 38; docs/decisions/0124, 0127; docs/sdk.md
 * "Reports"): a sent message of someone else offers "report", which opens a small form
 * (reason: spam, abuse, illegal, other; optional text) outside the message list, so a
 * redraw of the rows never loses what is typed. "send" calls `client.report`; the form
 * then says "report sent" (the text is cleared), or keeps the text and shows why it was
 * not sent (the SDK's check of the text's size, FORBIDDEN, NOT_FOUND, offline) until the
 * person sends again or closes it. One clientReportId per opened form: a retry after a
 * lost answer is stored once by the server.
 */

import { fromHex } from "../sdk/bytes";
import type { Client } from "../sdk/client";
import { REPORT_REASONS, type ReportReasonName } from "../sdk/reports";
import type { Row } from "./rows";

const LABELS: Record<ReportReasonName, string> = {
  spam: "spam", abuse: "abuse or harassment", illegal: "illegal content", other: "something else",
};

interface Target { conv: string; mid: string; crid: Uint8Array }

let target: Target | null = null;
let sending = false;

function node<K extends keyof HTMLElementTagNameMap>(tag: K, testid: string, text = ""): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.dataset.testid = testid;
  if (text) e.textContent = text;
  return e;
}

/** The form, made once and kept at the end of the body (hidden while unused). */
function form(): HTMLFormElement {
  const found = document.getElementById("report-form");
  if (found) return found as HTMLFormElement;
  const f = node("form", "report-form");
  f.id = "report-form";
  f.className = "report";
  f.hidden = true;
  const reason = node("select", "report-reason");
  reason.name = "reason";
  for (const name of Object.keys(REPORT_REASONS) as ReportReasonName[]) {
    const o = document.createElement("option");
    o.value = name;
    o.textContent = LABELS[name];
    reason.append(o);
  }
  const text = node("textarea", "report-text");
  text.name = "text";
  text.rows = 3;
  text.placeholder = "what is wrong (optional)";
  const send = node("button", "report-send", "send report");
  send.type = "submit";
  const close = node("button", "report-close", "close");
  close.type = "button";
  close.onclick = () => { f.hidden = true; target = null; };
  const row = document.createElement("div");
  row.className = "row";
  row.append(send, close);
  f.append(node("div", "report-about"), reason, text, row, node("div", "report-status"));
  document.body.append(f);
  return f;
}

function parts(f: HTMLFormElement) {
  const q = <T extends HTMLElement>(id: string) => f.querySelector(`[data-testid=${id}]`) as T;
  return { about: q<HTMLElement>("report-about"), reason: q<HTMLSelectElement>("report-reason"),
    text: q<HTMLTextAreaElement>("report-text"), send: q<HTMLButtonElement>("report-send"),
    status: q<HTMLElement>("report-status") };
}

function say(f: HTMLFormElement, state: "" | "sending" | "sent" | "failed", words: string): void {
  const { status } = parts(f);
  status.dataset.state = state;
  status.textContent = words;
}

async function submit(client: Client, f: HTMLFormElement): Promise<void> {
  const t = target;
  if (!t || sending) return;
  const { reason, text, send } = parts(f);
  sending = true;
  send.disabled = true;
  say(f, "sending", "sending…");
  try {
    await client.report(fromHex(t.conv), fromHex(t.mid), reason.value as ReportReasonName, text.value, t.crid);
    if (target === t) {
      text.value = "";
      say(f, "sent", "report sent: the operator will look at it");
    }
  } catch (e) {
    if (target === t) say(f, "failed", `not sent: ${(e as Error).message}`); // the text stays
  } finally {
    sending = false;
    send.disabled = false;
  }
}

/** Open the form for row `r` of conversation `conv` (hex); what `who` wrote is quoted. */
function open(client: Client, conv: string, r: Row, who: string): void {
  const f = form();
  f.onsubmit = (ev) => { ev.preventDefault(); void submit(client, f); };
  const p = parts(f);
  if (!target || target.mid !== r.messageId) {
    target = { conv, mid: r.messageId!, crid: crypto.getRandomValues(new Uint8Array(16)) };
    p.text.value = "";
    say(f, "", "");
  }
  p.about.textContent = `Report a message from ${who}: “${r.text.slice(0, 80)}”`;
  f.hidden = false;
  p.text.focus();
}

/** The "report" link of a sent message of someone else (none otherwise). */
export function reportLink(client: Client, conv: string | null, r: Row, who: string): HTMLElement[] {
  if (!conv || r.senderId === client.userId || r.state !== "sent" || !r.messageId) return [];
  const b = node("button", "report", "report");
  b.className = "link";
  b.title = "report this message to the operator";
  b.onclick = () => open(client, conv, r, who);
  return [b];
}
