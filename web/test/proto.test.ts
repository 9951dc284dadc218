import { readFileSync } from "node:fs";
import { create, fromBinary, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AuthOkSchema } from "../src/gen/qim/v1/connection_pb";
import { MailboxEntrySchema } from "../src/gen/qim/v1/mailbox_pb";
import { MarkReadSchema } from "../src/gen/qim/v1/session_pb";
import { fromHex, fromUtf8, parseU64, toHex, u64String } from "../src/sdk/bytes";

// bodies serialised by the Python protobuf runtime (test/gen_fixtures.py)
const CASES: any[] = JSON.parse(readFileSync(new URL("./proto.json", import.meta.url), "utf-8"));
const SCHEMAS: Record<string, DescMessage> = { MailboxEntry: MailboxEntrySchema, AuthOk: AuthOkSchema,
  MarkRead: MarkReadSchema };
const P53 = (1n << 53n) + 1n;
const U64 = (1n << 64n) - 1n;

describe("64-bit fields are bigint, never JS numbers", () => {
  for (const c of CASES) {
    it(`${c.type} from Python bytes`, () => {
      const msg: any = fromBinary(SCHEMAS[c.type], fromHex(c.hex));
      for (const [field, value] of Object.entries(c.fields)) {
        expect(typeof msg[field]).toBe("bigint");
        expect(u64String(msg[field])).toBe(value);
      }
      expect(toHex(toBinary(SCHEMAS[c.type], msg))).toBe(c.hex); // and back, byte for byte
    });
  }
  it("keeps 2^53 + 1 and 2^64 − 1 exact (a Number would not)", () => {
    const e = create(MailboxEntrySchema, { mailboxSeq: P53, senderId: U64, body: new TextEncoder().encode("你好 👋") });
    const back = fromBinary(MailboxEntrySchema, toBinary(MailboxEntrySchema, e));
    expect(back.mailboxSeq).toBe(P53);
    expect(back.senderId).toBe(U64);
    expect(BigInt(Number(P53))).not.toBe(P53); // what a JS number would have made of it
    expect(fromUtf8(back.body)).toBe("你好 👋");
  });
  it("parses only canonical decimal strings", () => {
    expect(parseU64("18446744073709551615")).toBe(U64);
    expect(parseU64("9007199254740993")).toBe(P53);
    for (const bad of ["18446744073709551616", "-1", "007", "1e3", " 7", "", "0x10"]) {
      expect(() => parseU64(bad)).toThrow(RangeError);
    }
    expect(() => parseU64(9007199254740993 as unknown as string)).toThrow(RangeError);
  });
});
