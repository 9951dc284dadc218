// The page's pending uploads (src/app/uploads.ts; issue 40): progress never runs backwards
// or past the size, a refusal keeps the upload with the service's reason in words, a retry
// starts it again from 0, and only a success or the person's removal drops it.
import { describe, expect, it } from "vitest";
import { MediaRefused } from "../src/sdk/media";
import { refusalWords, retryable, uploadWords, Uploads } from "../src/app/uploads";

const file = (n: number) => new Blob([new Uint8Array(n)]);

describe("uploads of the page", () => {
  it("progress is monotonic and bounded, per conversation", () => {
    let changes = 0;
    const u = new Uploads(() => changes++);
    const a = u.add("aa", file(1000), "beach.jpg");
    u.add("bb", file(10));
    u.progress(a.id, 600, 1000);
    u.progress(a.id, 300, 1000); // a late event of an earlier chunk
    expect(u.get(a.id)!.sent).toBe(600);
    u.progress(a.id, 5000, 1000);
    expect(u.get(a.id)!.sent).toBe(1000);
    expect(u.of("aa").map((x) => x.name)).toEqual(["beach.jpg"]);
    expect(u.of("bb").map((x) => x.name)).toEqual(["pasted image"]);
    expect(changes).toBe(5);
  });

  it("a refusal keeps the upload with its reason; retry restarts; done removes", () => {
    const u = new Uploads();
    const a = u.add("aa", file(2000), "big.png");
    u.progress(a.id, 2000, 2000);
    u.failed(a.id, new MediaRefused(429, "daily upload quota of 100 bytes reached"));
    expect(u.of("aa")).toHaveLength(1);
    expect(u.get(a.id)).toMatchObject({ state: "failed",
      failure: "daily upload quota reached (it renews tomorrow; retry then): daily upload quota of 100 bytes reached",
      retryable: true });
    u.progress(a.id, 10, 2000); // no progress for a failed upload
    expect(u.get(a.id)!.sent).toBe(2000);
    expect(u.retry(a.id)).toMatchObject({ state: "uploading", sent: 0, failure: "" });
    expect(u.retry(a.id)).toBeUndefined(); // only a failed one is retried
    u.done(a.id);
    expect(u.of("aa")).toEqual([]);
  });

  it("words for each refusal", () => {
    expect(refusalWords(new MediaRefused(413, "the file is 9 bytes; at most 8"))).toBe("file too big: the file is 9 bytes; at most 8");
    expect(refusalWords(new MediaRefused(415, "not image/png"))).toMatch(/^file type not allowed/);
    expect(refusalWords(new MediaRefused(0, "the media service could not be reached"))).toBe(
      "the media service could not be reached (retry when online)");
    expect(refusalWords(new MediaRefused(507, "disk"))).toBe("refused (507): disk");
    expect(refusalWords(new MediaRefused(400, "the file is empty (0 bytes): nothing to send"))).toBe(
      "file refused: the file is empty (0 bytes): nothing to send");
    expect(refusalWords(new MediaRefused(410, "the message was recalled"))).toBe("recalled or deleted: the message was recalled");
    expect(refusalWords(new RangeError("body of 99999 bytes exceeds 16384"))).toBe("not sent: body of 99999 bytes exceeds 16384");
    const up = new Uploads().add("aa", file(1_200_000), "a.mp4");
    expect(uploadWords(up)).toBe("a.mp4 · 0 B of 1.1 MiB");
  });

  it("sizes in KiB/MiB, the units of the service's refusals and of the message rows", () => {
    const u = new Uploads();
    const up = u.add("aa", file(21 * 1024 * 1024 + 5), "talk.mp4"); // a refusal says "20 MiB" of such a file
    u.progress(up.id, Math.round(5.6 * 1024 * 1024), up.size);
    expect(uploadWords(u.get(up.id)!)).toBe("talk.mp4 · 5.6 MiB of 21.0 MiB");
    u.progress(up.id, 512 * 1024 * 1024, up.size);
    expect(uploadWords(u.get(up.id)!)).toBe("talk.mp4 · 21.0 MiB");
    expect(uploadWords(new Uploads().add("aa", file(340 * 1024), "b.jpg"))).toBe("b.jpg · 0 B of 340.0 KiB");
  });

  it("a refusal that can never pass is not offered a retry; a transient one is", () => {
    for (const status of [400, 403, 404, 410, 413, 415, 422]) {
      const u = new Uploads();
      const a = u.add("aa", file(10), "x.png");
      u.failed(a.id, new MediaRefused(status, "no"));
      expect([status, u.get(a.id)!.retryable]).toEqual([status, false]);
      expect(u.retry(a.id)).toBeUndefined(); // the same bytes would be refused again
      expect(u.get(a.id)!.state).toBe("failed");
    }
    for (const e of [new MediaRefused(0, "unreachable"), new MediaRefused(429, "quota"), new MediaRefused(503, "down"),
      new MediaRefused(500, "boom"), new MediaRefused(401, "expired"), new Error("connection closed")]) {
      expect(retryable(e)).toBe(true);
      const u = new Uploads();
      const a = u.add("aa", file(10), "x.png");
      u.failed(a.id, e);
      expect(u.retry(a.id)).toMatchObject({ state: "uploading", retryable: false });
    }
    expect(refusalWords(new MediaRefused(429, "daily upload quota of 1 MiB reached"))).toMatch(/renews tomorrow/);
    expect(refusalWords(new MediaRefused(503, "MediaUnavailable"))).toMatch(/^the media service is unavailable now \(retry later\)/);
  });
});
