// qim-js reports without a network (src/sdk/reports.ts; the rules of qim/wire/report.py,
// decision 0124): the request carries the reason, text, peer and a 16-byte
// client_report_id that a retry repeats; a bad reason or long text is refused locally.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../src/gen/qim/v1/common_pb";
import { ReportOkSchema, ReportReason, ReportSchema } from "../src/gen/qim/v1/moderation_pb";
import { Op } from "../src/sdk/protocol";
import { report, type ReportHost } from "../src/sdk/reports";

const CONV = new Uint8Array(16).fill(2);
const MSG = new Uint8Array(16).fill(9);

describe("qim-js reports", () => {
  it("sends REPORT and repeats the client_report_id on a retry; refuses bad input before sending", async () => {
    const sent: { opcode: number; body: Uint8Array }[] = [];
    const host: ReportHost = {
      request: async (opcode, body) => {
        sent.push({ opcode, body });
        return { opcode: Op.REPORT_OK, body: toBinary(ReportOkSchema, create(ReportOkSchema, {
          reportId: "1-0", duplicate: sent.length > 1 })) };
      },
    };
    const first = await report(host, CONV, MSG, 5n, "spam", "again");
    expect([first.reportId, first.duplicate, first.clientReportId.length]).toEqual(["1-0", false, 16]);
    const req = fromBinary(ReportSchema, sent[0].body);
    expect([sent[0].opcode, req.reason, req.text, req.peerUserId]).toEqual([Op.REPORT, ReportReason.SPAM, "again", 5n]);
    const again = await report(host, CONV, MSG, 5n, "spam", "again", first.clientReportId);
    expect(again.duplicate).toBe(true);
    expect(fromBinary(ReportSchema, sent[1].body).clientReportId).toEqual(first.clientReportId);
    await expect(report(host, CONV, MSG, 5n, "boring" as never)).rejects.toMatchObject({ code: ErrorCode.INVALID_ARGUMENT });
    await expect(report(host, CONV, MSG, 5n, "other", "x".repeat(1001)))
      .rejects.toMatchObject({ code: ErrorCode.PAYLOAD_TOO_LARGE });
    expect(sent.length).toBe(2);
  });
});
