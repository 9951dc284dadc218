/**
 * The page's chatroom pane (docs/sdk.md "Chatrooms"): "Join room" joins a room and
 * shows it; posts arrive once each in roomSeq order ("roomEvents"); where the SDK said
 * a re-join could not replay everything, a bar says earlier messages are missing
 * (data-testid=room-truncated), never a silent gap; the composer posts to the room;
 * "Leave" leaves it. Nothing of a room is stored or counted as unread. One room at a
 * time on the page; the joined room is kept in sessionStorage, so a reload joins it again
 * instead of silently leaving it. Every row shows a name (PULL_PROFILES for events that
 * carry none) and its time.
 */

import type { Client } from "../sdk/client";
import type { QimEvent, RoomMessage } from "../sdk/events";

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const KEPT = 500; // rows of the pane
const ROOM_KEY = "qim.room"; // sessionStorage: the room joined in this tab
export const TRUNCATED_TEXT = "Earlier messages of this room are missing here: you were away longer than the room keeps them, or its server restarted.";

export class RoomView {
  private room: bigint | null = null;
  private members = 0;
  private state = "";
  private names = new Map<bigint, string>();
  private off: () => void;

  constructor(private readonly client: Client, private readonly showError: (m: string) => void) {
    this.off = client.on((e) => this.onEvent(e));
    $<HTMLFormElement>("join-room").onsubmit = (ev) => {
      ev.preventDefault();
      const input = $<HTMLInputElement>("join-room-id");
      this.join(BigInt(input.value.trim())).catch((e) => this.showError(`join: ${(e as Error).message}`));
    };
    $<HTMLFormElement>("room-composer").onsubmit = (ev) => {
      ev.preventDefault();
      this.post().catch((e) => this.showError(`room post: ${(e as Error).message}`));
    };
    $<HTMLTextAreaElement>("room-text").onkeydown = (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey) {
        ev.preventDefault();
        $<HTMLFormElement>("room-composer").requestSubmit();
      }
    };
    $("leave-room").onclick = () => this.leave().catch((e) => this.showError(`leave: ${(e as Error).message}`));
  }

  dispose(): void {
    this.off();
  }

  /** Join again the room this tab was in before a reload. */
  async restore(): Promise<void> {
    const room = sessionStorage.getItem(ROOM_KEY);
    if (room) await this.join(BigInt(room)).catch((e) => this.showError(`join: ${(e as Error).message}`));
  }

  private async join(roomId: bigint): Promise<void> {
    if (this.room !== null && this.room !== roomId) await this.leave();
    this.room = roomId;
    sessionStorage.setItem(ROOM_KEY, String(roomId));
    $("room-rows").replaceChildren();
    $("room").hidden = false;
    const info = await this.client.joinRoom(roomId, 50);
    this.members = Number(info.memberCount);
    this.head();
  }

  private async leave(): Promise<void> {
    const room = this.room;
    if (room === null) return;
    this.room = null;
    sessionStorage.removeItem(ROOM_KEY);
    $("room").hidden = true;
    await this.client.leaveRoom(room);
  }

  private async post(): Promise<void> {
    const box = $<HTMLTextAreaElement>("room-text");
    const text = box.value;
    if (this.room === null || !text.trim()) return;
    box.value = "";
    try {
      await this.client.sendRoom(this.room, text);
    } catch (e) {
      box.value = text; // refused: the text stays to be fixed
      throw e;
    }
  }

  private head(): void {
    $("room-title").textContent = `room ${this.room} · ${this.members} member${this.members === 1 ? "" : "s"}` +
      (this.state && this.state !== "joined" ? ` · ${this.state}` : "");
  }

  private onEvent(e: QimEvent): void {
    if (this.room === null || !("roomId" in e) || e.roomId !== this.room) return;
    if (e.type === "roomState") {
      this.state = e.reason && e.state === "left" ? `left: ${e.reason}` : e.state;
    } else if (e.type === "roomEvents") {
      if (e.memberCount) this.members = e.memberCount;
      const rows = $("room-rows");
      if (e.truncated) {
        const bar = document.createElement("li");
        bar.className = "room-truncated";
        bar.dataset.testid = "room-truncated";
        bar.textContent = TRUNCATED_TEXT;
        rows.append(bar);
      }
      for (const m of e.events) rows.append(this.row(m));
      while (rows.children.length > KEPT) rows.firstElementChild?.remove();
      rows.lastElementChild?.scrollIntoView({ block: "end" });
    }
    this.head();
  }

  private row(m: RoomMessage): HTMLLIElement {
    const li = document.createElement("li");
    li.dataset.testid = "room-row";
    li.dataset.seq = String(m.roomSeq);
    const who = m.senderName || this.names.get(m.senderId) || `user ${m.senderId}`;
    if (!m.senderName && !this.names.has(m.senderId)) void this.learnName(m.senderId, li, m);
    const time = document.createElement("time");
    time.className = "room-time";
    time.textContent = new Date(Number(m.createdAtMs)).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    if (m.kind === "joined" || m.kind === "left") {
      li.className = "room-notice";
      li.textContent = `${who} ${m.kind} the room`;
    } else if (m.kind === "post") {
      const name = document.createElement("b");
      name.textContent = `${who}: `;
      const body = document.createElement("span");
      body.dataset.testid = "room-text";
      body.textContent = m.recalled ? "(message recalled)" : new TextDecoder().decode(m.body);
      li.append(name, body);
    } else {
      li.className = "room-notice";
      li.textContent = m.kind === "recall" ? `${who} recalled a message` : "(an event this page does not know)";
    }
    li.prepend(time);
    return li;
  }

  /** The name of a user an event named by id only (a leave): asked once, the row drawn again. */
  private async learnName(user: bigint, li: HTMLLIElement, m: RoomMessage): Promise<void> {
    try {
      const name = (await this.client.displayNames([user])).get(user);
      if (!name) return;
      this.names.set(user, name);
      li.replaceWith(this.row(m));
    } catch {
      // offline: the id stays shown
    }
  }
}
