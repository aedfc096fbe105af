export { connect, ServedRepo } from "./client.js";
export type * from "./client.js";
export * from "./errors.js";
export type { HttpOptions } from "./http.js";
export type { components, paths } from "./schema.js";
