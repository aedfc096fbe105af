/**
 * How the client talks to `mnemo serve`: requests, answers, errors, and the only retries it makes.
 *
 * Requests carry the token; answers are the one JSON form (JSON Lines for
 * streams). A redirect is never followed: the URL (or a proxy) is wrong.
 *
 * Retries (ADR 66): a request is sent again only where the API says repeating it
 * is safe. Any request answered 429 or 503 with `Retry-After` (the server's
 * bounds: it refused before reading the request, nothing was done) is sent
 * again after that wait, a few times; a `GET` (the API's reads, which write
 * nothing, and the reads sent as a `POST` for their body: `histories`) is also
 * sent again when the connection failed before an answer came.
 * A write whose connection failed is never repeated: it may have been made.
 */
import { MnemoError, NotFound, errorFrom } from "./errors.js";

/** Query values: absent ones (`undefined`, `null`) are left out. */
export type Query = Record<string, string | number | boolean | null | undefined>;

export interface HttpOptions {
  /** Milliseconds one request may take (default 60 000). */
  timeout?: number;
  /** How many times a request may be sent again where that is safe (default 3). */
  retries?: number;
  /** The longest wait for `Retry-After`, in milliseconds (default 5 000). */
  maxRetryWait?: number;
  /** A `fetch` to use instead of the global one (for tests, or a proxy agent). */
  fetch?: typeof fetch;
}

export interface Sent {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
  /** A read sent as a POST (its body too long for a query): as safe to repeat as a GET. */
  read?: boolean;
}

const RETRY_STATUSES = new Set([429, 503]);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Requests to one served store with one token. */
export class Http {
  readonly url: string;
  readonly #token: string;
  readonly #timeout: number;
  readonly #retries: number;
  readonly #maxRetryWait: number;
  readonly #fetch: typeof fetch;

  constructor(url: string, token: string, options: HttpOptions = {}) {
    this.url = url;
    this.#token = token;
    this.#timeout = options.timeout ?? 60_000;
    this.#retries = options.retries ?? 3;
    this.#maxRetryWait = options.maxRetryWait ?? 5_000;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** Send a request: a 2xx answer, else the error it carries thrown. */
  async send(method: string, path: string, sent: Sent = {}): Promise<Response> {
    const target = new URL(this.url + path);
    for (const [key, value] of Object.entries(sent.query ?? {})) {
      if (value !== undefined && value !== null) target.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}`, ...sent.headers };
    let body: string | undefined;
    if (sent.body !== undefined) {
      body = JSON.stringify(sent.body);
      headers["content-type"] = "application/json";
    }
    const where = `${target.origin}${target.pathname}`;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.#fetch(target, {
          method,
          headers,
          body,
          redirect: "manual",
          signal: AbortSignal.timeout(this.#timeout),
        });
      } catch (error) {
        const cause = describe(error);
        if (isTimeout(error)) throw new MnemoError(`${this.url} did not answer in time (${method} ${target.pathname})`);
        if (cause.code === "ECONNREFUSED" || cause.code === "ENOTFOUND") {
          throw new NotFound(`cannot reach ${this.url}: ${cause.text}`);
        }
        if ((method === "GET" || sent.read) && attempt < this.#retries) continue; // a read writes nothing: safe to repeat
        throw new MnemoError(`${this.url}: ${cause.text}`);
      }
      if (RETRY_STATUSES.has(response.status) && attempt < this.#retries) {
        const wait = retryAfter(response.headers.get("retry-after"));
        if (wait !== undefined) {
          await response.body?.cancel();
          await sleep(Math.min(wait, this.#maxRetryWait));
          continue;
        }
      }
      if (response.status >= 300 || response.type === "opaqueredirect") {
        throw await failure(response, where);
      }
      return response;
    }
  }

  /** The answer to a request, its JSON body decoded. */
  async json<T>(method: string, path: string, sent: Sent = {}): Promise<T> {
    return (await answer(await this.send(method, path, sent), this.url + path)) as T;
  }

  /** The answer to a request, its JSON body decoded, with the answer's `ETag` (unquoted; null when none). */
  async tagged<T>(method: string, path: string, sent: Sent = {}): Promise<{ value: T; etag: string | null }> {
    const response = await this.send(method, path, sent);
    const etag = response.headers.get("etag")?.replace(/^W\//, "").replace(/^"|"$/g, "") ?? null;
    return { value: (await answer(response, this.url + path)) as T, etag };
  }

  /** A JSON Lines stream read whole, with the answer's `ETag` (unquoted; null when none). */
  async taggedLines<T>(path: string, query: Query): Promise<{ values: T[]; etag: string | null }> {
    const response = await this.send("GET", path, { query });
    const etag = response.headers.get("etag")?.replace(/^W\//, "").replace(/^"|"$/g, "") ?? null;
    const values: T[] = [];
    for await (const value of jsonLines<T>(response)) values.push(value);
    return { values, etag };
  }

  /** A JSON Lines stream, decoded as the caller iterates. */
  async *lines<T>(path: string, query: Query): AsyncGenerator<T> {
    const response = await this.send("GET", path, { query });
    yield* jsonLines<T>(response);
  }
}

/** The JSON body of an answer (`MnemoError` when it has none: a proxy's page, say). */
async function answer(response: Response, where: string): Promise<unknown> {
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    throw new MnemoError(`the server's answer was cut short: ${describe(error).text}`);
  }
  try {
    return JSON.parse(text);
  } catch {
    const kind = response.headers.get("content-type") ?? "no content type";
    throw new MnemoError(`${where.split("?")[0]} answered with no JSON (${kind})`);
  }
}

/** The error a refusal carries; a body that is not the error form is named by its status. */
async function failure(response: Response, where: string): Promise<MnemoError> {
  let body: unknown;
  try {
    body = JSON.parse(await response.text());
  } catch {
    body = undefined;
  }
  const found = errorFrom(body, response.status);
  if (found !== undefined) return found;
  const status = response.status || 0;
  const message =
    status >= 300 && status < 400
      ? `HTTP ${status} (a redirect, to ${response.headers.get("location") ?? "nowhere said"}) from ${where}: not followed`
      : `HTTP ${status} from ${where}`;
  return status === 404 ? new NotFound(message, { status }) : new MnemoError(message, { status });
}

/** The values of a JSON Lines answer; a last line `{"error": …}` is thrown as its error. */
export async function* jsonLines<T>(response: Response): AsyncGenerator<T> {
  if (response.body === null) return;
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const reader = response.body.getReader();
  let pending = "";
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        throw new MnemoError(`the server's answer was cut short: ${describe(error).text}`);
      }
      if (chunk.done) break;
      pending += decoder.decode(chunk.value, { stream: true });
      let end: number;
      while ((end = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, end).trim();
        pending = pending.slice(end + 1);
        if (line) yield parseLine<T>(line);
      }
    }
    const last = (pending + decoder.decode()).trim();
    if (last) yield parseLine<T>(last);
  } finally {
    reader.releaseLock();
    await response.body.cancel().catch(() => undefined);
  }
}

function parseLine<T>(line: string): T {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new MnemoError(`the server's answer is not JSON Lines: ${JSON.stringify(line.slice(0, 80))}`);
  }
  if (typeof value === "object" && value !== null && Object.keys(value).length === 1 && "error" in value) {
    throw errorFrom(value) ?? new MnemoError(`the server's stream failed: ${line.slice(0, 200)}`);
  }
  return value as T;
}

function retryAfter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
}

function describe(error: unknown): { text: string; code?: string } {
  let current: unknown = error;
  let code: string | undefined;
  const parts: string[] = [];
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    parts.push(current.message);
    code ??= (current as { code?: string }).code;
    current = (current as { cause?: unknown }).cause;
  }
  return { text: parts.join(": ") || String(error), code };
}
