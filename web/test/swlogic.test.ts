// The service worker's rules without a browser (src/app/swlogic.ts; docs/decisions/0143):
// QIM's Web Push cleartext parsed strictly, the badge_version rule (older ignored whole,
// equal shown, silent only badges), the notification's tag per conversation and the
// address a click opens; and the page's VAPID key check (src/app/pushview.ts).
import { describe, expect, it } from "vitest";
import { conversationUrl, decide, notificationOf, PayloadInvalid, parsePayload } from "../src/app/swlogic";
import { vapidKeyBytes } from "../src/app/pushview";

const alert = { badge: "3", badge_version: "12", conversation: "0a1b", silent: "0", message: "ff01", title: "New message",
  body: "hi there" };

describe("the service worker's payload rules", () => {
  it("parses an alert and a silent update", () => {
    expect(parsePayload(JSON.stringify(alert))).toEqual({ badge: 3, badgeVersion: 12, conversation: "0a1b", silent: false,
      message: "ff01", title: "New message", body: "hi there" });
    const silent = parsePayload(JSON.stringify({ badge: "0", badge_version: "13", conversation: "", silent: "1" }));
    expect(silent).toMatchObject({ badge: 0, badgeVersion: 13, silent: true, title: "", body: "" });
  });

  it("refuses what is not QIM's alert JSON, naming why", () => {
    const bad: [string, RegExp][] = [
      ["{", /not JSON/], ["[1]", /not a JSON object/], ["null", /not a JSON object/],
      [JSON.stringify({ ...alert, badge: 3 }), /badge is not a string/],
      [JSON.stringify({ ...alert, badge: "-1" }), /badge is not a decimal/],
      [JSON.stringify({ ...alert, badge_version: "1e3" }), /badge_version is not a decimal/],
      [JSON.stringify({ ...alert, badge_version: "9007199254740993" }), /badge_version is not a decimal/],
      [JSON.stringify({ ...alert, conversation: "../x" }), /not hex/],
      [JSON.stringify({ ...alert, conversation: "" }), /an alert without a conversation/],
    ];
    for (const [text, why] of bad) {
      expect(() => parsePayload(text)).toThrow(PayloadInvalid);
      expect(() => parsePayload(text)).toThrow(why);
    }
  });

  it("ignores an older badge_version whole, shows an equal or newer one, badges a silent update only", () => {
    const p = parsePayload(JSON.stringify(alert));
    expect(decide(p, 0)).toEqual({ show: true, badge: true, stale: false });
    expect(decide(p, 12)).toEqual({ show: true, badge: true, stale: false });
    expect(decide(p, 13)).toEqual({ show: false, badge: false, stale: true });
    const silent = { ...p, silent: true };
    expect(decide(silent, 11)).toEqual({ show: false, badge: true, stale: false });
    expect(decide(silent, 20)).toEqual({ show: false, badge: false, stale: true });
  });

  it("tags the notification with the conversation and opens the page at it", () => {
    const n = notificationOf(parsePayload(JSON.stringify(alert)));
    expect(n.title).toBe("New message");
    expect(n.options).toEqual({ body: "hi there", tag: "0a1b", renotify: true,
      data: { conversation: "0a1b", message: "ff01", badge: 3, badgeVersion: 12 } });
    const bare = notificationOf(parsePayload(JSON.stringify({ ...alert, title: "", body: "" })));
    expect([bare.title, bare.options.body]).toEqual(["New message", "New message"]);
    expect(conversationUrl("http://127.0.0.1:8088/", "0a1b")).toBe("http://127.0.0.1:8088/?conversation=0a1b");
    expect(conversationUrl("http://127.0.0.1:8088/", "not hex")).toBe("http://127.0.0.1:8088/");
  });
});

describe("the page's VAPID key", () => {
  it("takes the base64url of a 65-byte uncompressed P-256 point and refuses anything else", () => {
    const point = new Uint8Array(65).fill(9);
    point[0] = 4;
    const b64 = Buffer.from(point).toString("base64url");
    expect(vapidKeyBytes(b64)).toEqual(point);
    expect(() => vapidKeyBytes(b64.slice(0, 40))).toThrow(/not a P-256 point/);
    expect(() => vapidKeyBytes("a+b/")).toThrow(/not base64url/);
    expect(() => vapidKeyBytes(Buffer.from(new Uint8Array(65).fill(9)).toString("base64url"))).toThrow(/P-256/);
  });
});
