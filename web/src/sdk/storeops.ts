/**
 * Store operations of the app-facing Client (qim.sdk.client's store calls): a
 * conversation opened before any message, a group created or left, a recall applied
 * locally, the history floor reached, the peer of a direct conversation.
 */

import { fromBinary } from "@bufbuild/protobuf";
import { GroupOkSchema } from "../gen/qim/v1/group_pb";
import { toHex } from "./bytes";
import { emptyResult, type ApplyResult } from "./model";
import type { LocalStore } from "./store";
import { clearQuotes } from "./quotes";
import { ListTx } from "./storelist";

/** List the conversation from now on (direct: with its peer; group: with its id). */
export function openConversation(s: LocalStore, conv: Uint8Array, peer: bigint, groupId: bigint): Promise<ApplyResult> {
  return s.transact(async (tx) => {
    const list = new ListTx(tx, s.userId);
    await list.row(conv, peer, groupId);
    return list.finish(emptyResult());
  });
}

/** A group this user created (joined from seq 0), left (at the CONTROL seq) or renamed (`retitled`);
 * a create or leave marks the group read up to its CONTROL seq. */
export function noteGroup(s: LocalStore, reply: Uint8Array, groupId: bigint, joined: boolean,
  title = "", retitled = false): Promise<ApplyResult> {
  const ok = fromBinary(GroupOkSchema, reply);
  return s.transact(async (tx) => {
    const list = new ListTx(tx, s.userId);
    const r = await list.row(ok.conversationId, 0n, groupId);
    if (r && retitled) r.title = title;
    else if (r) {
      if (joined) Object.assign(r, { joinedAt: 0n, leftAt: 0n });
      else r.leftAt = ok.conversationSeq;
      if (title) r.title = title;
      // its CONTROL message is our own: it marks the group read up to it, as the server's
      // registration does (qim.sdk store_lists.note_group): a group left unread is read
      list.moveRead(r, ok.conversationSeq, true);
    }
    return list.finish(emptyResult());
  });
}

/** Our recall took effect: the stored copy loses its body at once. */
export function markState(s: LocalStore, messageId: Uint8Array, state: number): Promise<ApplyResult> {
  return s.transact(async (tx) => {
    const out = emptyResult();
    const m = await tx.objectStore("messages").get(toHex(messageId));
    const list = new ListTx(tx, s.userId);
    if (m && (m.state !== state || m.body.length)) {
      const row = { ...m, state, body: new Uint8Array(0) };
      await tx.objectStore("messages").put(row);
      out.updated.push(row);
      await list.noteMessage(row);
    }
    for (const reply of await clearQuotes(tx, messageId, state)) {  // the replies quoting it (decision 0134)
      out.updated.push(reply);
      await list.noteMessage(reply);
    }
    if (out.updated.length) await list.finish(out);
    return out;
  });
}

/** History paging reached the conversation's first message (no more pages to ask for). */
export async function setOldestReached(s: LocalStore, conv: Uint8Array): Promise<void> {
  await s.transact(async (tx) => {
    const r = await tx.objectStore("conversations").get(toHex(conv));
    if (r) await tx.objectStore("conversations").put({ ...r, oldestReached: true } as typeof r);
  });
}

/** True once setOldestReached ran for the conversation. */
export async function oldestReached(s: LocalStore, conv: Uint8Array): Promise<boolean> {
  const r = await s.transact((tx) => tx.objectStore("conversations").get(toHex(conv)));
  return Boolean(r && (r as { oldestReached?: boolean }).oldestReached);
}
