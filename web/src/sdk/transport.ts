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

/**
 * The browser's WebSocket as a Transport (ws:// in development, wss:// otherwise).
 * A class, not an object literal with stub callbacks: a bundler may treat a literal's
 * `onClose: () => {}` as a constant and drop the call the Connection replaces it with.
 */
export class WebSocketTransport implements Transport {
  onMessage: (data: Uint8Array) => void = () => undefined;
  onClose: (reason: string) => void = () => undefined;
  private done = false;

  constructor(private readonly ws: WebSocket) {
    ws.onmessage = (ev) => {
      if (!(ev.data instanceof ArrayBuffer)) {
        this.close("text message from the server"); // the protocol is binary only, as on the server
        return;
      }
      this.onMessage(new Uint8Array(ev.data));
    };
    ws.onclose = (ev) => this.fire(`closed by the server (code ${ev.code}${ev.reason ? ": " + ev.reason : ""})`);
  }

  send(chunk: Uint8Array): void {
    this.ws.send(chunk);
  }

  close(reason: string): void {
    if (this.ws.readyState === WebSocket.CONNECTING || this.ws.readyState === WebSocket.OPEN) {
      this.ws.close(1000, reason.slice(0, 100));
    }
    this.fire(reason);
  }

  private fire(reason: string): void {
    if (this.done) return;
    this.done = true;
    this.onClose(reason);
  }
}

/** Open a WebSocket to `endpoint`; ConnectionLost when it does not open. */
export const dialWebSocket: Dialer = (endpoint) => new Promise((resolve, reject) => {
  let ws: WebSocket;
  try {
    ws = new WebSocket(endpoint);
  } catch (e) {
    reject(new ConnectionLost(`cannot open ${endpoint}: ${(e as Error).message}`));
    return;
  }
  ws.binaryType = "arraybuffer";
  ws.onopen = () => resolve(new WebSocketTransport(ws));
  ws.onclose = (ev) => reject(new ConnectionLost(`cannot connect to ${endpoint} (close ${ev.code})`));
  ws.onerror = () => undefined; // onclose follows with the code
});
