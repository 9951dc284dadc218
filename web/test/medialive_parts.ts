/**
 * qim-js uploads in presigned parts against a real MediaService and object store, driven
 * by tests/web/test_web_media_page_parts.py (run with vite-node): one JSON request on argv
 * {base, token, file, name}, one JSON line on stdout: {ref (base64 of the MEDIA body),
 * puts (how many part PUTs went out), progress (the last bytes told)} or {status, reason}
 * of a MediaRefused. Uses web/src/sdk/mediaparts.ts exactly as client.sendMedia does.
 */
import { readFileSync } from "node:fs";
import { MediaRefused } from "../src/sdk/media";
import { uploadParts } from "../src/sdk/mediaparts";

async function main(): Promise<unknown> {
  const req = JSON.parse(process.argv[process.argv.length - 1]);
  let puts = 0, told = 0;
  const counting = ((input: RequestInfo | URL, init?: RequestInit) => {
    if (init?.method === "PUT") puts++;
    return fetch(input, init);
  }) as typeof fetch;
  try {
    const up = await uploadParts(req.base, req.token, new Uint8Array(readFileSync(req.file)),
      { name: req.name, progress: (sent) => (told = sent) }, { fetch: counting });
    return { ref: Buffer.from(up.body).toString("base64"), puts, progress: told };
  } catch (e) {
    if (e instanceof MediaRefused) return { status: e.status, reason: e.reason };
    throw e;
  }
}

main().then((out) => console.log(JSON.stringify(out)));
