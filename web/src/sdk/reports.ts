/**
 * Reports in qim-js (the counterpart of qim.sdk.reports; docs/sdk.md "Reports";
 * docs/decisions/0124): a member reports a message to the deployment's operator. The
 * reason and the text are checked before anything is sent (the rules of
 * qim/wire/report.py); a retry with the returned clientReportId is stored once.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ErrorCode } from "../gen/qim/v1/common_pb";
import { ReportOkSchema, ReportSchema } from "../gen/qim/v1/moderation_pb";
import { ServerError } from "./errors";
import { Op } from "./protocol";

/** The reasons the server takes (moderation.proto ReportReason). */
export const REPORT_REASONS = { spam: 1, abuse: 2, illegal: 3, other: 4 } as const;
export type ReportReasonName = keyof typeof REPORT_REASONS;
/** The free text's limit in bytes of UTF-8. */
export const REPORT_TEXT_MAX_BYTES = 1000;

/** What reports.ts needs of the runtime. */
export interface ReportHost {
  request(opcode: number, body: Uint8Array): Promise<{ opcode: number; body: Uint8Array }>;
}

/** The server's answer: the operator's id, whether it was stored before, the id to retry with. */
export interface Reported {
  reportId: string;
  duplicate: boolean;
  clientReportId: Uint8Array;
}

/**
 * Send one REPORT and wait for REPORT_OK. Throws ServerError INVALID_ARGUMENT (an
 * unknown reason) or PAYLOAD_TOO_LARGE (text over 1,000 bytes) before anything is sent;
 * the server's FORBIDDEN (not a member) or NOT_FOUND (no such message) as ServerError.
 */
export async function report(host: ReportHost, conv: Uint8Array, messageId: Uint8Array, peerUserId: bigint,
                             reason: ReportReasonName, text = "", clientReportId?: Uint8Array): Promise<Reported> {
  if (!Object.prototype.hasOwnProperty.call(REPORT_REASONS, reason)) {
    throw new ServerError(ErrorCode.INVALID_ARGUMENT, `reason: one of ${Object.keys(REPORT_REASONS).join(", ")}`);
  }
  if (new TextEncoder().encode(text).length > REPORT_TEXT_MAX_BYTES) {
    throw new ServerError(ErrorCode.PAYLOAD_TOO_LARGE, `text exceeds ${REPORT_TEXT_MAX_BYTES} bytes`);
  }
  const crid = clientReportId ?? crypto.getRandomValues(new Uint8Array(16));
  const req = create(ReportSchema, { conversationId: conv, messageId, reason: REPORT_REASONS[reason], text,
    clientReportId: crid, peerUserId });
  const reply = await host.request(Op.REPORT, toBinary(ReportSchema, req));
  const ok = fromBinary(ReportOkSchema, reply.body);
  return { reportId: ok.reportId, duplicate: ok.duplicate, clientReportId: crid };
}
