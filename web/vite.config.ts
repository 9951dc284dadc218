// The web client is one page (index.html → src/app/main.ts) built into dist/, which
// qim-web serves; vitest runs the unit tests of qim-js under node (test/).
import { defineConfig } from "vitest/config";

export default defineConfig({
  build: { outDir: "dist", target: "es2022", emptyOutDir: true },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
});
