/**
 * The errors of a served store, one class per kind the server names.
 *
 * An error body, `{"error": {"kind", "message", "exit_code"}}`, becomes the class
 * its `kind` names, carrying that kind and the exit code `mnemo` gives it
 * (`exitCode`, also readable as `exit_code`, the body's and Python's spelling); a
 * failed `If-Match` (412) is a `RefConflict`. An answer that is not the API (a
 * proxy's page, a redirect, a stream cut short, a timeout) is a `MnemoError`
 * naming the URL, as the Python client raises.
 */
import type { components } from "./schema.js";

/** The kinds of error the API names (`error.kind` of the error body). */
export type Kind = components["schemas"]["Error"]["error"]["kind"];

/** The error body of every refusal. */
export type ErrorBody = components["schemas"]["Error"];

/** Root of every error the client throws. */
export class MnemoError extends Error {
  /** The kind the server named (`MnemoError` for an answer that is not the API's). */
  readonly kind: Kind;
  /** The exit code `mnemo` gives this error (1 when the server named none). */
  readonly exitCode: number;
  /** The HTTP status of the answer, when there was one. */
  readonly status: number | undefined;

  constructor(message: string, options: { kind?: Kind; exitCode?: number; status?: number } = {}) {
    super(message);
    this.name = new.target.name;
    this.kind = options.kind ?? KIND_OF_CLASS.get(new.target) ?? "MnemoError";
    this.exitCode = options.exitCode ?? EXIT_CODES[this.kind];
    this.status = options.status;
  }

  /** {@link exitCode} as the API's error body and the Python client spell it (`exit_code`). */
  get exit_code(): number {
    return this.exitCode;
  }
}

/** The caller passed something the store refuses: a bad id, bad JSON, a bad parameter. */
export class InvalidInput extends MnemoError {}
/** A store, ref, revision, id, branch or tenant does not exist (or nothing answers at the URL). */
export class NotFound extends MnemoError {}
/** The version asked for was erased on purpose; its redaction record survives. */
export class Redacted extends NotFound {}
/** A compare-and-swap on a branch failed (an `If-Match` that no longer holds): nothing was written. */
export class RefConflict extends MnemoError {}
/** Merge resolutions were stale or left conflicts unresolved. */
export class MergeConflict extends MnemoError {}
/** Two claims on one (subject, predicate) start at the same time with different values. */
export class ClaimConflict extends MnemoError {}
/** Bytes read back from storage do not match their hash, or cannot be decoded. */
export class CorruptObject extends MnemoError {}
/** The server's disk is full; nothing was written. */
export class StorageFull extends MnemoError {}
/** No token, one the store does not honour, or a role too low. */
export class AccessDenied extends MnemoError {}

const CLASSES: Record<Kind, typeof MnemoError> = {
  AccessDenied,
  Redacted,
  NotFound,
  InvalidInput,
  ClaimConflict,
  MergeConflict,
  RefConflict,
  CorruptObject,
  StorageFull,
  MnemoError,
};

const KIND_OF_CLASS = new Map<unknown, Kind>(
  Object.entries(CLASSES).map(([kind, cls]) => [cls, kind as Kind]),
);

/** The exit code of each kind (docs/cli.md, "Exit codes"); the server sends it too. */
export const EXIT_CODES: Record<Kind, number> = {
  NotFound: 3,
  Redacted: 3,
  InvalidInput: 2,
  ClaimConflict: 2,
  MergeConflict: 2,
  RefConflict: 4,
  CorruptObject: 5,
  StorageFull: 6,
  AccessDenied: 7,
  MnemoError: 1,
};

/** The error an error body names (a kind this client does not know is a `MnemoError`). */
export function errorFrom(body: unknown, status?: number): MnemoError | undefined {
  if (typeof body !== "object" || body === null || !("error" in body)) return undefined;
  const error = (body as { error: unknown }).error;
  if (typeof error !== "object" || error === null) return undefined;
  const { kind, message, exit_code } = error as Record<string, unknown>;
  if (typeof message !== "string") return undefined;
  const known = typeof kind === "string" && Object.hasOwn(CLASSES, kind) ? (kind as Kind) : "MnemoError";
  const cls = status === 412 ? RefConflict : CLASSES[known];
  return new cls(message, {
    kind: status === 412 ? "RefConflict" : known,
    exitCode: typeof exit_code === "number" ? exit_code : EXIT_CODES[known],
    status,
  });
}
