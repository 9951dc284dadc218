/** qim-js: the TypeScript SDK of QIM (docs/sdk.md "qim-js"). */
export * from "./bytes";
export * from "./client";
export * from "./convstate";
export * from "./errors";
export * from "./events";
export * from "./frame";
export * from "./ids";
export * from "./model";
export * from "./media";
export * from "./extras";
export * from "./protocol";
export * from "./push";
export * from "./reactions";
export * from "./reports";
export { Runtime } from "./runtime";
export { LocalStore } from "./store";
export type { Dialer, Transport } from "./transport";
