import { describe, expect, it } from "vitest";
import { FIRST_SPREAD_MS, reconnectWait } from "../src/sdk/reconnect";

// docs/decisions/0078: the devices of a gateway that went away come back spread, not in one burst
describe("reconnect waits", () => {
  it("the first attempt after a loss is spread over the whole window", () => {
    const waits = Array.from({ length: 2000 }, () => reconnectWait(50, 0, true, 2000));
    expect(waits.every((w) => w >= 0 && w <= FIRST_SPREAD_MS)).toBe(true);
    const tenths = Array.from({ length: 10 }, (_, i) =>
      waits.filter((w) => w >= (i * FIRST_SPREAD_MS) / 10 && w < ((i + 1) * FIRST_SPREAD_MS) / 10).length);
    expect(Math.min(...tenths)).toBeGreaterThan(140);
    expect(Array.from({ length: 200 }, () => reconnectWait(50, 0, true, 500)).every((w) => w <= 500)).toBe(true);
  });

  it("later attempts are jittered around their backoff, and a hint is the earliest retry", () => {
    expect(Array.from({ length: 200 }, () => reconnectWait(1000, 0, false, 2000))
      .every((w) => w >= 500 && w <= 1500)).toBe(true);
    const hinted = Array.from({ length: 500 }, () => reconnectWait(50, 3000, true, 2000));
    expect(hinted.every((w) => w >= 3000 && w <= 3300)).toBe(true);
    expect(Math.max(...hinted) - Math.min(...hinted)).toBeGreaterThan(250);
  });
});
