/**
 * qim-js media against a real MediaService, driven by tests/web/test_web_media.py (run with
 * vite-node): one JSON request on argv ({op: "upload", base, token, file, name} or
 * {op: "download", base, token, ref, conv, message, peer}: ref base64, ids hex), one JSON
 * line on stdout: {ref} (base64 of the MEDIA body), {sha256, size, type} of the download,
 * or {status, reason} of a MediaRefused. Uses web/src/sdk/media.ts exactly as the page does.
 */
import { readFileSync } from "node:fs";
import { fromHex, toHex } from "../src/sdk/bytes";
import { decodeRef, fetchMedia, MediaRefused, upload } from "../src/sdk/media";

async function main(): Promise<unknown> {
  const req = JSON.parse(process.argv[process.argv.length - 1]);
  try {
    if (req.op === "upload") {
      const up = await upload(req.base, req.token, new Uint8Array(readFileSync(req.file)), { name: req.name });
      return { ref: Buffer.from(up.body).toString("base64") };
    }
    const ref = decodeRef(new Uint8Array(Buffer.from(req.ref, "base64")));
    const blob = await fetchMedia(req.base, req.token, ref, fromHex(req.conv), fromHex(req.message), BigInt(req.peer));
    const data = new Uint8Array(await blob.arrayBuffer());
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
    return { sha256: toHex(digest), size: data.length, type: blob.type };
  } catch (e) {
    if (e instanceof MediaRefused) return { status: e.status, reason: e.reason };
    throw e;
  }
}

main().then((out) => console.log(JSON.stringify(out)));
