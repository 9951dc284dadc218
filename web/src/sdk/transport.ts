/**
 * The transport under a qim-js Connection: one binary WebSocket message carries one
 * chunk of the frame protocol (docs/protocol.md "WebSocket"). `Transport` is the seam
 * the unit tests replace with a fake (test/fakeserver.ts); browsers use WebSocket.
 */

import { ConnectionLost } from "./errors";

/** A message-oriented, ordered, reliable link (one message = one frame chunk). */
export interface Transport {
  /** Queue one chunk. */
  send(chunk: Uint8Array): void;
  /** Close the link (idempotent); onClose fires once. */
  close(reason: string): void;
  /** Set by the Connection: a received message. */
  onMessage: (data: Uint8Array) => void;
  /** Set by the Connection: the link closed (by either side), with a reason. */
  onClose: (reason: string) => void;
}

/** Opens a transport to an endpoint; rejects with ConnectionLost when it cannot. */
export type Dialer = (endpoint: string) => Promise<Transport>;

/** The browser's WebSocket as a Transport (ws:// in development, wss:// otherwise). */
export const dialWebSocket: Dialer = (endpoint) => new Promise((resolve, reject) => {
  let ws: WebSocket;
  try {
    ws = new WebSocket(endpoint);
  } catch (e) {
    reject(new ConnectionLost(`cannot open ${endpoint}: ${(e as Error).message}`));
    return;
  }
  ws.binaryType = "arraybuffer";
  let opened = false;
  let closed = false;
  const t: Transport = {
    send: (chunk) => ws.send(chunk),
    close: (reason) => {
      if (ws.readyState === WebSocket.CONNECTING || ws.readyState === WebSocket.OPEN) ws.close(1000, reason.slice(0, 100));
      fire(reason);
    },
    onMessage: () => undefined,
    onClose: () => undefined,
  };
  const fire = (reason: string) => {
    if (closed) return;
    closed = true;
    t.onClose(reason);
  };
  ws.onopen = () => {
    opened = true;
    resolve(t);
  };
  ws.onmessage = (ev) => {
    if (!(ev.data instanceof ArrayBuffer)) {
      // the protocol is binary only: a text message is a fault, as on the server
      t.close("text message from the server");
      return;
    }
    t.onMessage(new Uint8Array(ev.data));
  };
  ws.onclose = (ev) => {
    if (!opened) reject(new ConnectionLost(`cannot connect to ${endpoint} (close ${ev.code})`));
    fire(`closed by the server (code ${ev.code}${ev.reason ? ": " + ev.reason : ""})`);
  };
  ws.onerror = () => undefined; // onclose follows with the code
});
