/**
 * A TypeScript client of a served store (`mnemo serve`): `connect(url, { token })`.
 *
 * The handle it returns has the Python client's methods (`commit`, `get`,
 * `nodes`, `log`, `history`, `blame`, `diff`, `facts`, `timeline`, `search`,
 * `context`, `verify`, `branches`, `merge`, `forget`, …), options in camelCase,
 * each result in the one JSON form, typed by the types generated from the
 * server's OpenAPI document (`src/schema.ts`). Errors are the classes of
 * `errors.ts`, carrying the server's `kind` and `exitCode`.
 *
 * A commit with `parent` is sent with `If-Match`: the server writes it only if
 * the branch is still at that commit, else `RefConflict` and nothing is written.
 */
import { InvalidInput, NotFound, Redacted } from "./errors.js";
import { Http, type HttpOptions, type Query } from "./http.js";
import type { components } from "./schema.js";

type Schemas = components["schemas"];
export type Node = Schemas["Node"];
/** A node as a commit takes it: every field but the content optional (`id` too: generated). */
export type NodeInput = Schemas["NodeInput"];
export type Commit = Schemas["Commit"];
export type CommitResult = Schemas["CommitResult"];
export type Version = Schemas["Version"];
export type Blame = Schemas["Blame"];
export type Diff = Schemas["Diff"];
export type Change = Schemas["Change"];
export type Fact = Schemas["Fact"];
export type Contradiction = Schemas["Contradiction"];
export type Hit = Schemas["Hit"];
export type Context = Schemas["Context"];
export type ReadRecord = Schemas["ReadRecord"];
export type MergeResult = Schemas["MergeResult"];
export type ForgetReport = Schemas["ForgetReport"];
export type Token = Schemas["Token"];
export type Tip = Schemas["Tip"];
export type History = Schemas["History"];
export type Freshness = Schemas["Freshness"];
export type IdList = Schemas["IdList"];
export type SearchBody = Schemas["SearchBodyInput"];
export type ContextBody = Schemas["ContextBodyInput"];
export type MergeBody = Schemas["MergeBodyInput"];

/** A revision: its text (branch, commit id or prefix, `REV~N`, `B@{TIME}`), or a commit. */
export type Rev = string | { id: string };
/** A time: RFC 3339 text or a `Date`. */
export type Time = string | Date;

export interface ConnectOptions extends HttpOptions {
  /** The token (`mnemo token create`): it names the tenant and the role. */
  token: string;
  /** The tenant expected (default: the token's own); another is `NotFound`. */
  tenant?: string;
}

const FULL_ID = /^[0-9a-f]{64}$/;

/**
 * A handle on one tenant of the store served at `url`.
 *
 * @param url where `mnemo serve` listens (`http://127.0.0.1:7777`; a path before `/v1` is kept).
 * @throws AccessDenied the server does not honour the token.
 * @throws NotFound nothing answers at `url`, or `tenant` is not the token's.
 */
export async function connect(url: string, options: ConnectOptions): Promise<ServedRepo> {
  if (typeof url !== "string" || !/^https?:\/\//.test(url)) {
    throw new InvalidInput(`a served store's URL starts with http:// or https://, not ${JSON.stringify(url)}`);
  }
  if (typeof options?.token !== "string" || !options.token) {
    throw new InvalidInput("give the token: connect(url, { token })");
  }
  const base = url.replace(/\/+$/, "");
  const http = new Http(base, options.token, options);
  const token = await http.json<Token>("GET", "/v1/whoami");
  if (options.tenant !== undefined && options.tenant !== token.tenant) {
    throw new NotFound(`no tenant ${JSON.stringify(options.tenant)} (this token reaches tenant ${JSON.stringify(token.tenant)})`);
  }
  return new ServedRepo(base, http, token);
}

function rev(value: Rev | undefined | null): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value;
  if (typeof value === "object" && typeof value.id === "string") return value.id;
  throw new InvalidInput("a revision is text or a commit");
}

function time(value: Time | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new InvalidInput("an invalid Date");
    return value.toISOString();
  }
  return value;
}

function segment(value: string, what: string): string {
  if (typeof value !== "string" || !value) throw new InvalidInput(`${what} must be non-empty text`);
  return encodeURIComponent(value);
}

/** One tenant of a served store, with the Python client's methods for an agent's work. */
export class ServedRepo {
  readonly url: string;
  /** The token this handle holds, as the server describes it (never its text). */
  readonly token: Token;
  readonly #http: Http;
  readonly #base: string;

  /** Use {@link connect}. */
  constructor(url: string, http: Http, token: Token) {
    this.url = url;
    this.#http = http;
    this.token = token;
    this.#base = `/v1/tenants/${encodeURIComponent(token.tenant)}`;
  }

  /** The tenant this handle reaches (its token's). */
  get tenant(): string {
    return this.token.tenant;
  }

  /** The token's role: `read`, `write` or `admin`. */
  get role(): Token["role"] {
    return this.token.role;
  }

  /** Whether writes are refused (a read token). */
  get readonly(): boolean {
    return this.token.role === "read";
  }

  // -- writing --------------------------------------------------------------------

  /**
   * Record nodes and removals as one atomic commit (201; `created` false when nothing changed).
   *
   * @param options.parent the tip the caller read: sent as `If-Match`.
   * @throws RefConflict `parent` was given and the branch has moved past it; nothing was written.
   */
  async commit(options: {
    put?: NodeInput[];
    delete?: string[];
    message?: string;
    author?: string;
    branch?: string;
    parent?: Rev;
    meta?: Record<string, unknown>;
    allowEmpty?: boolean;
    onClaimConflict?: "refuse" | "replace" | "keep";
  }): Promise<CommitResult> {
    const headers: Record<string, string> = {};
    if (options.parent !== undefined) {
      let expected = rev(options.parent) as string;
      if (!FULL_ID.test(expected)) expected = (await this.resolve(expected)).id;
      headers["if-match"] = `"${expected}"`;
    }
    const body = {
      put: options.put ?? [],
      delete: options.delete ?? [],
      message: options.message ?? "",
      author: options.author ?? null,
      branch: options.branch ?? null,
      meta: options.meta ?? null,
      allow_empty: options.allowEmpty ?? false,
      on_claim_conflict: options.onClaimConflict ?? "refuse",
    };
    return this.#http.json("POST", `${this.#base}/commits`, { body, headers });
  }

  /** Record that the current versions of `ids` were re-confirmed. */
  async verify(ids: string[], options: { by?: string; note?: string; branch?: string } = {}): Promise<Commit> {
    const body = { ids, by: options.by ?? null, note: options.note ?? null, branch: options.branch ?? null };
    return this.#http.json("POST", `${this.#base}/verify`, { body });
  }

  // -- reading --------------------------------------------------------------------

  /** The commit a revision names. */
  async resolve(revision: Rev = "HEAD", options: { asOf?: Time } = {}): Promise<Commit> {
    const path = `${this.#base}/commits/${segment(rev(revision) ?? "", "rev")}`;
    return this.#http.json("GET", path, { query: { as_of: time(options.asOf) } });
  }

  /**
   * The version of `id` in a snapshot, or `null` when absent.
   *
   * @throws Redacted the version there was erased.
   */
  async get(id: string, options: { at?: Rev; asOf?: Time; includeExpired?: boolean } = {}): Promise<Node | null> {
    const query = { at: rev(options.at), as_of: time(options.asOf), include_expired: options.includeExpired || undefined };
    try {
      return await this.#http.json<Node>("GET", `${this.#base}/nodes/${segment(id, "id")}`, { query });
    } catch (error) {
      if (error instanceof NotFound && !(error instanceof Redacted) && error.message.startsWith(`${id} is not in `)) {
        return null;
      }
      throw error;
    }
  }

  /**
   * The version of `id` at branch `at` (default: HEAD), with the tip the read saw (its `ETag`).
   *
   * Read the branch's other nodes `at` that tip, and commit with `parent` set to
   * it: nothing another writer did in between is overwritten (`RefConflict`).
   * `node` is null when the id is absent there (and `tip` then null too).
   */
  async getWithTip(id: string, options: { at?: string } = {}): Promise<{ node: Node | null; tip: string | null }> {
    try {
      const found = await this.#http.tagged<Node>("GET", `${this.#base}/nodes/${segment(id, "id")}`, { query: { at: options.at } });
      return { node: found.value, tip: found.etag };
    } catch (error) {
      if (error instanceof NotFound && !(error instanceof Redacted) && /^.* is not in /.test(error.message)) {
        return { node: null, tip: null };
      }
      throw error;
    }
  }

  /** The nodes under `prefix` at branch `at`, read whole, with the tip the read saw (its `ETag`). */
  async nodesWithTip(prefix: string, options: { at?: string } = {}): Promise<{ nodes: Node[]; tip: string | null }> {
    const found = await this.#http.taggedLines<Node>(`${this.#base}/nodes`, { prefix, at: options.at });
    return { nodes: found.values, tip: found.etag };
  }

  /** The nodes of a snapshot, by id, streamed (`limit`: a page; `after`: the last id of the previous one). */
  nodes(options: {
    at?: Rev;
    asOf?: Time;
    prefix?: string;
    includeExpired?: boolean;
    allowedFor?: string;
    maxSensitivity?: string;
    verifiedWithin?: string;
    after?: string;
    limit?: number;
  } = {}): AsyncGenerator<Node> {
    const query: Query = {
      at: rev(options.at),
      as_of: time(options.asOf),
      prefix: options.prefix,
      include_expired: options.includeExpired || undefined,
      allowed_for: options.allowedFor,
      max_sensitivity: options.maxSensitivity,
      verified_within: options.verifiedWithin,
      after: options.after,
      limit: options.limit,
    };
    return this.#http.lines<Node>(`${this.#base}/nodes`, query);
  }

  /**
   * The ids of a snapshot, in order, reading no node, and the commit listed (`null`: no commits yet).
   *
   * Pass `commit.id` as `at` to read the same snapshot again (a page of them with {@link histories}).
   */
  async ids(options: { at?: Rev; asOf?: Time; prefix?: string } = {}): Promise<IdList> {
    const query = { at: rev(options.at), as_of: time(options.asOf), prefix: options.prefix };
    return this.#http.json("GET", `${this.#base}/ids`, { query });
  }

  /**
   * Each of `ids` in one snapshot with its history, in one request (`limit: 0`: the nodes alone).
   *
   * An id absent, expired or erased there has `node` null. The answer is keyed by id, in the order given.
   */
  async histories(
    ids: string[],
    options: { at?: Rev; asOf?: Time; limit?: number; includeExpired?: boolean } = {},
  ): Promise<Record<string, History>> {
    if (!Array.isArray(ids)) throw new InvalidInput("ids must be a list of ids, not one string");
    const body = {
      ids,
      at: rev(options.at) ?? null,
      as_of: time(options.asOf) ?? null,
      limit: options.limit ?? null,
      include_expired: options.includeExpired ?? false,
    };
    return this.#http.json("POST", `${this.#base}/histories`, { body, read: true });
  }

  /** Commits reachable from `at`, newest first, streamed. */
  log(options: { at?: Rev; node?: string; limit?: number; asOf?: Time } = {}): AsyncGenerator<Commit> {
    const query = { at: rev(options.at), node: options.node, limit: options.limit, as_of: time(options.asOf) };
    return this.#http.lines<Commit>(`${this.#base}/log`, query);
  }

  /** Every version of `id` in `at`'s history, newest first. */
  async history(id: string, options: { at?: Rev; limit?: number } = {}): Promise<Version[]> {
    const query = { at: rev(options.at), limit: options.limit };
    return this.#http.json("GET", `${this.#base}/history/${segment(id, "id")}`, { query });
  }

  /** Who wrote the current version of `id`, when, from what. */
  async blame(id: string, options: { at?: Rev } = {}): Promise<Blame> {
    return this.#http.json("GET", `${this.#base}/blame/${segment(id, "id")}`, { query: { at: rev(options.at) } });
  }

  /** What changed from revision `a` (`null`: the empty snapshot) to `b`. */
  async diff(a: Rev | null, b: Rev, options: { asOf?: Time } = {}): Promise<Diff> {
    const query = { a: rev(a), b: rev(b), as_of: time(options.asOf) };
    return this.#http.json("GET", `${this.#base}/diff`, { query });
  }

  /** The claims in force on `subject` (and `predicate`) at `validAt`, as believed at `asOf`. */
  async facts(
    subject: string,
    predicate?: string,
    options: { validAt?: Time; asOf?: Time; at?: Rev; verifiedWithin?: string } = {},
  ): Promise<Fact[]> {
    let path = `${this.#base}/facts/${segment(subject, "subject")}`;
    if (predicate !== undefined) path += `/${segment(predicate, "predicate")}`;
    const query = {
      valid_at: time(options.validAt),
      as_of: time(options.asOf),
      at: rev(options.at),
      verified_within: options.verifiedWithin,
    };
    return this.#http.json("GET", path, { query });
  }

  /** Every claim on one (subject, predicate), by `valid_from`. */
  async timeline(subject: string, predicate: string, options: { asOf?: Time; at?: Rev } = {}): Promise<Fact[]> {
    const path = `${this.#base}/timeline/${segment(subject, "subject")}/${segment(predicate, "predicate")}`;
    return this.#http.json("GET", path, { query: { as_of: time(options.asOf), at: rev(options.at) } });
  }

  /** Open contradictions at `at` (`recorded`: those the commit at `at` recorded instead). */
  async contradictions(options: { at?: Rev; recorded?: boolean } = {}): Promise<Contradiction[]> {
    const query = { at: rev(options.at), recorded: options.recorded || undefined };
    return this.#http.json("GET", `${this.#base}/contradictions`, { query });
  }

  // -- recall ---------------------------------------------------------------------

  /** Recall memories by words and meaning, from one snapshot. */
  async search(
    query: string,
    options: {
      k?: number;
      at?: Rev;
      asOf?: Time;
      prefix?: string;
      validAt?: Time;
      kind?: "note" | "claim";
      meta?: Record<string, unknown>;
      mode?: SearchBody["mode"];
      runId?: string;
      allowedFor?: string;
      maxSensitivity?: string;
      verifiedWithin?: string;
    } = {},
  ): Promise<Hit[]> {
    const body: SearchBody = {
      query,
      k: options.k,
      at: rev(options.at) ?? null,
      as_of: time(options.asOf) ?? null,
      prefix: options.prefix ?? null,
      valid_at: time(options.validAt) ?? null,
      kind: options.kind ?? null,
      meta: options.meta ?? null,
      mode: options.mode,
      run_id: options.runId ?? null,
      allowed_for: options.allowedFor ?? null,
      max_sensitivity: options.maxSensitivity ?? null,
      verified_within: options.verifiedWithin ?? null,
    };
    return this.#http.json("POST", `${this.#base}/search`, { body: dropUndefined(body) });
  }

  /** The smallest cited context for `query` that fits the budget. */
  async context(
    query: string,
    options: {
      budgetTokens?: number;
      k?: number;
      at?: Rev;
      asOf?: Time;
      prefix?: string;
      validAt?: Time;
      runId?: string;
      allowedFor?: string;
      maxSensitivity?: string;
      verifiedWithin?: string;
    } = {},
  ): Promise<Context> {
    const body: ContextBody = {
      query,
      budget_tokens: options.budgetTokens,
      k: options.k,
      at: rev(options.at) ?? null,
      as_of: time(options.asOf) ?? null,
      prefix: options.prefix ?? null,
      valid_at: time(options.validAt) ?? null,
      run_id: options.runId ?? null,
      allowed_for: options.allowedFor ?? null,
      max_sensitivity: options.maxSensitivity ?? null,
      verified_within: options.verifiedWithin ?? null,
    };
    return this.#http.json("POST", `${this.#base}/context`, { body: dropUndefined(body) });
  }

  /** What searches and contexts recorded under `runId` returned. */
  async reads(runId: string): Promise<ReadRecord[]> {
    return this.#http.json("GET", `${this.#base}/reads/${segment(runId, "run_id")}`);
  }

  // -- branches -------------------------------------------------------------------

  /** The current branch's name. */
  async head(): Promise<string> {
    return (await this.#http.json<Schemas["Branches"]>("GET", `${this.#base}/branches`)).head;
  }

  /** Names of the branches that have commits, sorted. */
  async branches(): Promise<string[]> {
    return (await this.branchTips()).map(([name]) => name);
  }

  /** Each branch with the commit at its tip, sorted by name. */
  async branchTips(): Promise<[string, Commit][]> {
    const found = await this.#http.json<Schemas["Branches"]>("GET", `${this.#base}/branches`);
    return found.branches.flatMap((tip) => (tip.commit === null ? [] : [[tip.name, tip.commit] as [string, Commit]]));
  }

  /** The id of the commit at `branch`'s tip; `null` when it has no commits. */
  async tip(branch: string): Promise<string | null> {
    try {
      const found = await this.#http.json<Tip>("GET", `${this.#base}/branches/${segment(branch, "branch")}`);
      return found.commit?.id ?? null;
    } catch (error) {
      if (error instanceof NotFound) return null;
      throw error;
    }
  }

  /**
   * A branch's tip (`null`: no commits yet) and the tenant's erasure count, from one snapshot.
   *
   * What a client that keeps what it read compares before serving it again: one round trip.
   */
  async freshness(branch: string): Promise<Freshness> {
    return this.#http.json("GET", `${this.#base}/freshness/${segment(branch, "branch")}`);
  }

  /** Create branch `name` at `at` (default: HEAD), or with no commits (`orphan`); the commit it starts at. */
  async branch(name: string, options: { at?: Rev; orphan?: boolean; author?: string } = {}): Promise<Commit | null> {
    const body = { name, at: rev(options.at) ?? null, orphan: options.orphan ?? false, author: options.author ?? null };
    return (await this.#http.json<Tip>("POST", `${this.#base}/branches`, { body })).commit;
  }

  /** Delete a branch (its reflog stays); the commit it pointed at. */
  async deleteBranch(name: string): Promise<Commit | null> {
    return (await this.#http.json<Tip>("DELETE", `${this.#base}/branches/${segment(name, "branch")}`)).commit;
  }

  /** Merge revision `source` into `into`; conflicts come back as data, with nothing written. */
  async merge(
    source: Rev,
    options: {
      into?: string;
      resolutions?: Record<string, "ours" | "theirs" | "base" | "delete" | NodeInput>;
      strategy?: MergeBody["strategy"];
      message?: string;
      author?: string;
      allowUnrelatedHistories?: boolean;
    } = {},
  ): Promise<MergeResult> {
    const body = {
      source: rev(source),
      into: options.into ?? null,
      resolutions: options.resolutions ?? null,
      strategy: options.strategy ?? null,
      message: options.message ?? null,
      author: options.author ?? null,
      allow_unrelated_histories: options.allowUnrelatedHistories ?? false,
    };
    return this.#http.json("POST", `${this.#base}/merge`, { body });
  }

  // -- erasure --------------------------------------------------------------------

  /** Erase every version of `ids` (or one `version` of a single id) for real; needs an admin token. */
  async forget(
    ids: string | string[],
    reason: string,
    options: { author?: string; version?: string } = {},
  ): Promise<ForgetReport> {
    const body = {
      ids: typeof ids === "string" ? [ids] : ids,
      reason,
      author: options.author ?? null,
      version: options.version ?? null,
    };
    const found = await this.#http.json<Schemas["ForgetReports"]>("POST", `${this.#base}/forget`, { body });
    if (found.reports.length === 1) return found.reports[0] as ForgetReport;
    // The server tells one erasure id by id: put it back together.
    return {
      redactions: found.reports.flatMap((one) => one.redactions),
      already_erased: found.reports.flatMap((one) => one.already_erased),
      commit: found.reports.find((one) => one.commit !== null)?.commit ?? null,
    };
  }
}

function dropUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
