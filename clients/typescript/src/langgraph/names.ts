/**
 * How LangGraph's threads, namespaces and checkpoints are named in a store: as the Python saver names them.
 *
 * A thread is the branch `threads/<segment>` (ADR 28): the id itself when plain,
 * else escaped readably (`user@example.com` is `threads/_user_40example.com`).
 * Below it, each namespace, checkpoint id, task id and channel is one id segment:
 * the name itself when plain, else `_` and 32 hex digits of its SHA-256 (ADRs 17, 33).
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
