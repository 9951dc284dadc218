/**
 * Attaching media to the open conversation (issue 40; docs/sdk.md "The web page's
 * media"): an attach button (with a hidden file input) beside the composer, files
 * dropped onto the chat and images pasted into the composer. Each file is an Upload
 * (uploads.ts) shown above the composer with a progress bar; the MediaService takes it
 * (client.sendMedia: POST /v1/media with the device's token, across origins by CORS,
 * decision 0146) and its reference goes out as a MEDIA message, whose row then shows the
 * thumbnail (mediaview.ts). A refusal keeps the upload with its reason in words (quota,
 * too big, type ...) and a Remove, and a Retry only where trying again can pass (the
 * network, the quota, the service down: uploads.ts retryable): a file is never lost
 * without the person seeing why. A refused upload shows no progress bar. An upload under
 * way when the page reloads or closes is kept in the store and sent at the next start
 * (client.resumeMedia, main.ts); a refused one is not (the person saw it refused).
 */

import { fromHex } from "../sdk/bytes";
import type { Client } from "../sdk/client";
import { uploadWords, Uploads, type Upload } from "./uploads";

function made<T extends HTMLElement>(id: string, tag: string, attrs: Record<string, string>, text = ""): T {
  const found = document.getElementById(id);
  if (found) return found as T; // the page's DOM outlives a ChatView (sign out, sign in again)
  const e = document.createElement(tag);
  e.id = id;
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  e.textContent = text;
  return e as T;
}

/** The attach controls and pending uploads of one signed-in page. */
export class Attach {
  readonly uploads = new Uploads(() => this.render());

  constructor(private readonly client: Client, private readonly openConv: () => string | null,
    private readonly showError: (m: string) => void) {
    this.bind();
  }

  private bind(): void {
    const form = document.getElementById("composer") as HTMLFormElement;
    const ta = form.elements.namedItem("text") as HTMLTextAreaElement;
    const input = made<HTMLInputElement>("attach-input", "input", { type: "file", multiple: "",
      "data-testid": "attach-input", hidden: "" });
    const button = made<HTMLButtonElement>("attach", "button", { type: "button", "data-testid": "attach",
      title: "Attach photos or files (or drop them on the chat, or paste an image)" }, "📎");
    const list = made<HTMLUListElement>("uploads", "ul", { class: "uploads", "data-testid": "uploads" });
    if (!input.isConnected) form.prepend(input, button);
    if (!list.isConnected) form.before(list);
    button.disabled = !this.client.mediaUrl;
    if (!this.client.mediaUrl) button.title = "No media service configured for this page";
    button.onclick = () => input.click();
    input.onchange = () => {
      this.add([...(input.files ?? [])]);
      input.value = ""; // the same file may be chosen again
    };
    const chat = document.getElementById("chat") as HTMLElement;
    const carriesFiles = (ev: DragEvent) => [...(ev.dataTransfer?.types ?? [])].includes("Files");
    chat.ondragover = (ev) => {
      if (!carriesFiles(ev)) return;
      ev.preventDefault(); // allows the drop
      chat.classList.add("dropping");
    };
    chat.ondragleave = () => chat.classList.remove("dropping");
    chat.ondrop = (ev) => {
      if (!carriesFiles(ev)) return;
      ev.preventDefault(); // the browser would open the file instead
      chat.classList.remove("dropping");
      this.add([...(ev.dataTransfer?.files ?? [])]);
    };
    ta.onpaste = (ev) => { // an image pasted (a screenshot): attached; pasted text stays text
      const files = [...(ev.clipboardData?.files ?? [])];
      if (!files.length) return;
      ev.preventDefault();
      this.add(files);
    };
  }

  /** Attach `files` to the open conversation and start their uploads. */
  add(files: Blob[]): void {
    const conv = this.openConv();
    if (!files.length) return;
    if (!conv) return this.showError("Open a conversation first, then attach.");
    if (!this.client.mediaUrl) return this.showError("Not sent: no media service is configured for this page.");
    for (const f of files) void this.start(this.uploads.add(conv, f));
  }

  private async start(up: Upload): Promise<void> {
    try {
      // wait=false: the MEDIA send is stored as pending (its row appears) and goes out as text does
      await this.client.sendMedia(fromHex(up.conversation), up.file, { name: up.name,
        progress: (sent, total) => this.uploads.progress(up.id, sent, total) }, false);
      this.uploads.done(up.id);
    } catch (e) {
      this.uploads.failed(up.id, e); // kept with the reason: Retry or Remove (never lost silently)
    }
  }

  /** Draw the open conversation's uploads above the composer. */
  render(): void {
    const list = document.getElementById("uploads");
    if (!list) return;
    list.replaceChildren(...this.uploads.of(this.openConv()).map((up) => this.node(up)));
  }

  private node(up: Upload): HTMLElement {
    const li = document.createElement("li");
    li.className = "upload";
    Object.assign(li.dataset, { testid: "upload", state: up.state, name: up.name });
    const words = document.createElement("span");
    words.dataset.testid = "upload-name";
    words.textContent = uploadWords(up);
    li.append(words);
    if (up.state === "uploading") { // a refused upload shows its reason, never a (full) bar
      const bar = document.createElement("progress");
      bar.dataset.testid = "upload-progress";
      bar.max = Math.max(up.size, 1);
      bar.value = up.sent;
      li.append(bar);
    } else {
      const why = document.createElement("span");
      why.className = "upload-error";
      why.dataset.testid = "upload-error";
      why.textContent = up.failure;
      li.append(why);
      if (up.retryable) { // only a refusal that can pass later (uploads.ts retryable); never 413/415 ...
        const retry = document.createElement("button");
        Object.assign(retry, { type: "button", className: "link", textContent: "retry" });
        retry.dataset.testid = "upload-retry";
        retry.onclick = () => {
          const again = this.uploads.retry(up.id);
          if (again) void this.start(again);
        };
        li.append(retry);
      }
      const remove = document.createElement("button");
      Object.assign(remove, { type: "button", className: "link", textContent: "remove" });
      remove.dataset.testid = "upload-remove";
      remove.onclick = () => this.uploads.done(up.id);
      li.append(remove);
    }
    return li;
  }
}
