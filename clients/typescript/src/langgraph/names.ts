/**
 * How LangGraph's threads, namespaces and checkpoints are named in a store: as the Python saver names them.
 *
 * A thread is the branch `threads/<segment>` (ADR 28): the id itself when plain,
 * else escaped readably (`user@example.com` is `threads/_user_40example.com`).
 * Below it, each namespace, checkpoint id, task id and channel is one id segment.
 * A checkpoint or task id is the name itself when plain, else `_` and 32 hex digits
 * of its SHA-256 (ADR 17). A namespace and a channel read as their names (ADR 65):
 * the root namespace is `_root`, another namespace that is not plain `_` and its
 * name escaped, a channel its name escaped (`%`, `/`, `~`, control and invisible
 * characters percent-encoded), past 80 bytes a readable prefix, `~` and a digest.
 * An earlier version named a namespace by `_` and a digest ({@link segment}): such
 * a namespace stays where it began.
 */
import { createHash } from "node:crypto";

export const THREADS_PREFIX = "threads/";
const MAX_SEGMENT = 80;
const PLAIN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$/;
const LITERAL = /^[A-Za-z0-9.-]$/;

/** Whether `name` stands for itself in a branch name or an id segment. */
export function isPlain(name: string): boolean {
  return PLAIN.test(name) && !name.includes("..") && !name.endsWith(".") && !name.endsWith(".lock");
}

function digest(name: string): string {
  return createHash("sha256").update(Buffer.from(name, "utf8")).digest("hex").slice(0, 32);
}

/** One id segment for a namespace, checkpoint id, task id or channel: distinct for distinct names. */
export function segment(name: string): string {
  if (typeof name !== "string") throw new TypeError(`a namespace, checkpoint id or task id must be text`);
  return isPlain(name) ? name : `_${digest(name)}`;
}

/** The segment of the root (empty) namespace: no escaped name and no digest is `_root`. */
export const ROOT_NAMESPACE = "_root";
const LONGEST = 80;

// The store's escaping of labels (mnemosyne/integrations/langgraph/namespaces.py, ADR 18):
// `%`, `/`, `~`, control characters and the invisible ones ids refuse (mnemosyne/model/validation.py).
const ESCAPED = new RegExp(
  "[%/~\\x00-\\x1f\\x7f-\\x9f\\u00ad\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u0890\\u0891\\u08e2\\u180e\\u200b-\\u200f" +
    "\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ufeff\\ufff9-\\ufffb\\u{110bd}\\u{110cd}\\u{13430}-\\u{1343f}" +
    "\\u{1bca0}-\\u{1bca3}\\u{1d173}-\\u{1d17a}\\u{e0001}\\u{e0020}-\\u{e007f}]",
  "gu",
);

const bytes = (text: string) => Buffer.byteLength(text, "utf8");

/** One label escaped as the store escapes a LangGraph store's labels: readable, injective. */
export function escape(text: string): string {
  let out = text.replace(ESCAPED, (char) =>
    Array.from(Buffer.from(char, "utf8"), (byte) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`).join(""),
  );
  if (out === "." || out === "..") out = out.replaceAll(".", "%2E");
  return out || "~";
}

function bounded(escapedName: string, name: string): string {
  if (bytes(escapedName) <= LONGEST) return escapedName;
  const chars = Array.from(escapedName).slice(0, LONGEST - 33);
  while (bytes(chars.join("")) > LONGEST - 33) chars.pop();
  let prefix = chars.join("");
  if (prefix.slice(-2).includes("%")) prefix = prefix.slice(0, prefix.lastIndexOf("%")); // never half an escape
  return `${prefix}~${digest(name)}`;
}

/** A namespace's id segment (ADR 65): itself when plain, `_root` for the root, else `_` and its name escaped. */
export function namespaceSegment(ns: string): string {
  if (typeof ns !== "string") throw new TypeError("a namespace must be text");
  if (isPlain(ns)) return ns;
  if (!ns) return ROOT_NAMESPACE;
  return bounded("_" + escape(ns), ns);
}

/** A channel's id segment (ADR 65): its name escaped (`messages`, `__start__`, `branch:to:agent` as they are). */
export function channelSegment(channel: string): string {
  if (typeof channel !== "string") throw new TypeError("a channel must be text");
  return bounded(escape(channel), channel);
}

function escaped(name: string): string[] {
  const chars = Array.from(name);
  const tokens: string[] = [];
  chars.forEach((char, index) => {
    let literal = LITERAL.test(char);
    const rest = chars.slice(index).join("");
    if (char === "." && (index === chars.length - 1 || tokens[tokens.length - 1] === "." || rest === ".lock")) {
      literal = false; // no "..", and no name ending in "." or ".lock"
    }
    tokens.push(
      literal
        ? char
        : Array.from(Buffer.from(char, "utf8"), (byte) => `_${byte.toString(16).toUpperCase().padStart(2, "0")}`).join(""),
    );
  });
  return tokens;
}

/** The branch of thread `threadId`: `threads/` and the id when plain, else escaped (ADR 28). */
export function threadBranch(threadId: string): string {
  if (typeof threadId !== "string") throw new TypeError("a thread id must be text");
  if (isPlain(threadId)) return THREADS_PREFIX + threadId;
  const tokens = escaped(threadId);
  const whole = "_" + tokens.join("");
  if (whole.length <= MAX_SEGMENT) return THREADS_PREFIX + whole;
  let prefix = "_";
  for (const token of tokens) {
    if (prefix.length + token.length > MAX_SEGMENT - 2 - 32) break;
    prefix += token;
  }
  return THREADS_PREFIX + prefix + "_x" + digest(threadId);
}

const BARE = /^[A-Za-z0-9_.:@+|-]+$/;

/** A name as a commit message shows it: bare when plain, else JSON-quoted; cut past `width`. */
export function shown(text: string, width = 40): string {
  const chars = Array.from(text);
  const cut = chars.length <= width ? text : chars.slice(0, width - 1).join("") + "…";
  if (BARE.test(cut)) return cut;
  return JSON.stringify(cut).replace(/[\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
