// The web client is one page (index.html → src/app/main.ts) and its service worker
// (src/app/sw.ts → sw.js) built into dist/, which
// qim-web serves; vitest runs the unit tests of qim-js under node (test/).
import { defineConfig } from "vitest/config";

export default defineConfig({
  build: {
    outDir: "dist", target: "es2022", emptyOutDir: true,
    // the service worker (src/app/sw.ts) is a second entry kept at /sw.js: its scope is the
    // page, and it imports nothing the page bundles, so it is one classic script (decision 0143)
    rollupOptions: {
      input: { index: "index.html", sw: "src/app/sw.ts" },
      output: { entryFileNames: (chunk) => (chunk.name === "sw" ? "sw.js" : "assets/[name]-[hash].js") },
    },
  },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
});
