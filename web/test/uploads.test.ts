// The page's pending uploads (src/app/uploads.ts; issue 40): progress never runs backwards
// or past the size, a refusal keeps the upload with the service's reason in words, a retry
// starts it again from 0, and only a success or the person's removal drops it.
import { describe, expect, it } from "vitest";
import { MediaRefused } from "../src/sdk/media";
import { refusalWords, uploadWords, Uploads } from "../src/app/uploads";

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
      failure: "daily upload quota reached: daily upload quota of 100 bytes reached" });
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
    expect(refusalWords(new MediaRefused(410, "the message was recalled"))).toBe("recalled or deleted: the message was recalled");
    expect(refusalWords(new RangeError("body of 99999 bytes exceeds 16384"))).toBe("not sent: body of 99999 bytes exceeds 16384");
    const up = new Uploads().add("aa", file(1_200_000), "a.mp4");
    expect(uploadWords(up)).toBe("a.mp4 · 0 B of 1.2 MB");
  });
});
