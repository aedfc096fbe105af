/**
 * `MnemosyneSaver`: LangGraph.js's checkpointer on a served store, laid out as the Python saver lays it out.
 *
 * The layout (ADRs 17, 28, 33 and 65; ADR 67 for this saver):
 *
 * - a thread is the branch `threads/<thread>`, each checkpoint one commit on it
 *   (`checkpoint step 3 (loop)`), so `mnemo log --thread <id>` is its history;
 * - a namespace is `threads/<thread>/<ns>`: `_root` for the root one, a plain name
 *   as itself, another `_` and its name escaped (a namespace an earlier version
 *   named by `_` and a digest stays there);
 * - a channel's value lives at one id per namespace,
 *   `threads/<thread>/<ns>/~channels/<channel>` (`channel`, `version`, the value,
 *   and `written_by`: the checkpoint whose put wrote it), and the commit of each
 *   checkpoint's put holds that checkpoint's values there, so `mnemo diff` of two
 *   steps shows a changed channel as one id, old -> new;
 * - the checkpoint node, `threads/<thread>/<ns>/<checkpoint>`, holds the checkpoint
 *   without its values, the metadata, and `values_from`: for each channel, the
 *   checkpoint whose put wrote its value; `threads/<thread>/<ns>/~latest` names the
 *   latest; pending writes are `…/<checkpoint>/w/<task>/<idx>`;
 * - values are stored as `values.ts` says: JSON where exact, else the serializer's bytes.
 *
 * A checkpoint node of ADR 33 (`channels`, its values at `…/<checkpoint>/c/<channel>`)
 * reads as it was. An earlier checkpoint's values are read from the commit of its
 * own put. Every write is one commit sent with `If-Match` (the tip the saver read,
 * or committed last): another writer's commit in between makes it read again and
 * retry, never overwrite. Reads are at one tip, named by the first read's `ETag`.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
} from "@langchain/langgraph-checkpoint";

import type { Node, NodeInput, ServedRepo } from "../client.js";
import { NotFound, Redacted, RefConflict } from "../errors.js";
import {
  POINTER,
  STABLE,
  WRITES,
  WRITTEN_BY,
  type Located,
  atStableIds,
  channelNodeId,
  channelNodes,
  checkpointNode,
  content,
  holds,
  isCheckpoint,
  pinnedId,
  slashes,
  stableId,
  writersOf,
} from "./layout.js";
import { checkpointMessage, writesMessage } from "./messages.js";
import { THREADS_PREFIX, namespaceSegment, segment, threadBranch } from "./names.js";
import { Snapshot } from "./snapshot.js";
import { loaded, stored } from "./values.js";

const TRIES = 8;

/** What the saver knows of a namespace's latest checkpoint after its own last commit on the thread. */
interface Known {
  tip: string;
  /** The namespace's id: readable (ADR 65), or where an earlier version began it. */
  base: string;
  latest: string | null;
  channels: Record<string, Located>;
  /** Whether the namespace's value nodes at `tip` are exactly `channels` (a put then reads nothing). */
  exact: boolean;
  metadata: Record<string, unknown> | null;
  /** The ids of the latest checkpoint's writes, once read (undefined: not read since its put). */
  writes: Set<string> | undefined;
}

export interface MnemosyneSaverOptions {
  /** LangGraph's serializer, for values with no exact JSON form (default: its JSON-plus serializer). */
  serde?: SerializerProtocol;
  /** The author of the saver's commits (default `langgraph`). */
  author?: string;
}

type Values = Map<string, Record<string, unknown>>;

/** A LangGraph.js checkpointer whose threads are branches of a served Mnemosyne store. */
export class MnemosyneSaver extends BaseCheckpointSaver {
  readonly repo: ServedRepo;
  readonly author: string;
  readonly #known = new Map<string, Known>();
  readonly #turns = new Map<string, Promise<unknown>>();

  /**
   * @param repo a handle from `connect(url, { token })` (the tenant the threads live in).
   */
  constructor(repo: ServedRepo, options: MnemosyneSaverOptions = {}) {
    super(options.serde);
    this.repo = repo;
    this.author = options.author ?? "langgraph";
  }

  // -- reading ----------------------------------------------------------------------

  /**
   * The checkpoint `config` names, or the latest of its thread and namespace.
   *
   * The latest: its pointer (whose `ETag` names the tip), then at that tip, in
   * parallel, the checkpoint node with its writes and the namespace's values: three
   * requests. An earlier checkpoint's values come from the commit of its own put.
   */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) return undefined;
    const ns = String(config.configurable?.checkpoint_ns ?? "");
    const branch = threadBranch(String(threadId));
    const wanted = getCheckpointId(config);
    let nodeId: string;
    let found: { nodes: Node[]; tip: string | null } | null;
    let current: Promise<Map<string, Node>> | undefined;
    if (wanted) {
      nodeId = `${branch}/${namespaceSegment(ns)}/${segment(wanted)}`;
      found = await this.#prefix(nodeId, branch);
      const legacy = `${branch}/${segment(ns)}/${segment(wanted)}`;
      if (found !== null && !found.nodes.some((node) => node.id === nodeId) && legacy !== nodeId) {
        nodeId = legacy; // under the namespace's segment of an earlier version
        found = await this.#prefix(nodeId, found.tip ?? branch);
      }
    } else {
      const namespace = await this.#namespaceAt(branch, ns, branch);
      if (namespace.pointer === null) return undefined;
      nodeId = `${namespace.base}/${segment(String(content(namespace.pointer).latest))}`;
      const tip = namespace.tip ?? branch;
      current = this.#stable(namespace.base, tip);
      current.catch(() => undefined); // awaited below, once the checkpoint says it is wanted
      found = await this.#prefix(nodeId, tip);
      if (found !== null && namespace.tip !== null) found.tip = namespace.tip;
    }
    if (found === null) return undefined;
    const tip = found.tip ?? branch;
    const mine = found.nodes.filter((node) => node.id === nodeId || node.id.startsWith(nodeId + "/"));
    const node = mine.find((one) => one.id === nodeId);
    if (node === undefined || !isCheckpoint(node)) return undefined;
    const base = nodeId.slice(0, nodeId.lastIndexOf("/"));
    const saved = content(node);
    const values = atStableIds(saved)
      ? await this.#values(base, node, tip, await (current ?? this.#stable(base, tip)))
      : await this.#legacyValues(base, saved, tip, new Map(mine.map((one) => [one.id, one])));
    const writes = mine.filter((one) => one.id.startsWith(nodeId + WRITES)).map(content);
    let sends: unknown[] | undefined;
    const record = saved.checkpoint as Record<string, unknown>;
    if (typeof saved.parent === "string" && Number((record.json as { v?: number } | undefined)?.v ?? 4) < 4) {
      const parentWrites = (await this.repo.nodesWithTip(`${base}/${segment(saved.parent)}${WRITES}`, { at: tip })).nodes;
      sends = await this.#sends(parentWrites.map(content));
    }
    return this.#tuple(saved, values, writes, sends);
  }

  /** The nodes under `prefix` at `at` with the tip read (null: no such branch). */
  async #prefix(prefix: string, at: string): Promise<{ nodes: Node[]; tip: string | null } | null> {
    try {
      return await this.repo.nodesWithTip(prefix, { at });
    } catch (error) {
      if (error instanceof NotFound && !(error instanceof Redacted)) return null;
      throw error;
    }
  }

  async #get(id: string, at: string): Promise<{ node: Node | null; tip: string | null }> {
    try {
      return await this.repo.getWithTip(id, { at });
    } catch (error) {
      if (error instanceof NotFound && !(error instanceof Redacted)) return { node: null, tip: null };
      throw error;
    }
  }

  /**
   * The namespace's id on a thread's branch and its pointer (null: no checkpoint yet), at `at`.
   *
   * Its readable id (ADR 65), unless only the digest an earlier version named it
   * by has a pointer: a namespace stays where it began.
   */
  async #namespaceAt(branch: string, ns: string, at: string): Promise<{ base: string; pointer: Node | null; tip: string | null }> {
    const base = `${branch}/${namespaceSegment(ns)}`;
    const found = await this.#get(base + POINTER, at);
    const legacy = `${branch}/${segment(ns)}`;
    if (found.node === null && legacy !== base) {
      const earlier = await this.#get(legacy + POINTER, at);
      if (earlier.node !== null) return { base: legacy, pointer: earlier.node, tip: earlier.tip };
    }
    return { base, pointer: found.node, tip: found.tip };
  }

  /** The namespace's value nodes at `at`, by id, in one read (an erased one is left out). */
  async #stable(base: string, at: string): Promise<Map<string, Node>> {
    const found = await this.#prefix(base + STABLE, at);
    return new Map((found?.nodes ?? []).map((node) => [node.id, node]));
  }

  /**
   * The values of checkpoint `node` (ADR 65): at the tip where its value nodes hold them, else in
   * the commit of its own put, else at a copy's pinned id, else in the value node's history.
   */
  async #values(base: string, node: Node, tip: string, current: Map<string, Node>): Promise<Values> {
    const values: Values = new Map();
    const missing: [string, string][] = [];
    for (const [channel, writer] of Object.entries(writersOf(content(node)))) {
      const value = current.get(stableId(base, channel));
      if (holds(value, writer)) values.set(channel, content(value));
      else missing.push([channel, writer]);
    }
    if (missing.length === 0) return values;
    for (const [channel] of missing) {
      const id = stableId(base, channel);
      if (!current.has(id)) await this.#get(id, tip); // left out as erased? then it says so (Redacted)
    }
    const own = await this.repo.history(node.id, { at: tip, limit: 1 });
    const earlier = own[0] ? await this.#stable(base, own[0].commit.id) : new Map<string, Node>();
    await Promise.all(
      missing.map(async ([channel, writer]) => {
        let value: Node | null | undefined = earlier.get(stableId(base, channel));
        if (!holds(value, writer)) value = (await this.#get(pinnedId(base, writer, channel), tip)).node;
        if (value === null) value = await this.#inHistory(stableId(base, channel), writer, tip);
        if (value !== null && value !== undefined) values.set(channel, content(value)); // a node gone by hand: no value
      }),
    );
    return values;
  }

  /** The newest version of a value node that `writer`'s put wrote, from its history. */
  async #inHistory(id: string, writer: string, tip: string): Promise<Node | null> {
    let versions;
    try {
      versions = await this.repo.history(id, { at: tip });
    } catch (error) {
      if (error instanceof NotFound && !(error instanceof Redacted)) return null;
      throw error;
    }
    return versions.find((version) => holds(version.node, writer))?.node ?? null;
  }

  /** The values of an ADR 33 checkpoint node: at per-checkpoint ids, read at the tip. */
  async #legacyValues(base: string, saved: Record<string, unknown>, tip: string, own: Map<string, Node>): Promise<Values> {
    const values: Values = new Map();
    await Promise.all(
      Object.entries(writersOf(saved)).map(async ([channel, writer]) => {
        const id = channelNodeId(base, writer, channel);
        const have = own.get(id) ?? (await this.#get(id, tip)).node;
        if (have !== null) values.set(channel, content(have)); // a node gone by hand leaves the channel empty
      }),
    );
    return values;
  }

  async #sends(writes: Record<string, unknown>[]): Promise<unknown[]> {
    const tasks = writes.filter((write) => write.channel === TASKS);
    tasks.sort((a, b) => compareWritesSortKeys(sortKey(a), sortKey(b)));
    return Promise.all(tasks.map((write) => loaded(this.serde, write)));
  }

  async #tuple(saved: Record<string, unknown>, values: Values, writes: Record<string, unknown>[], sends: unknown[] | undefined): Promise<CheckpointTuple> {
    const threadId = String(saved.thread_id);
    const ns = String(saved.checkpoint_ns);
    const checkpointId = String(saved.checkpoint_id);
    const checkpoint = (await loaded(this.serde, saved.checkpoint as Record<string, unknown>)) as Checkpoint;
    const channelValues: Record<string, unknown> = {};
    for (const channel of Object.keys(checkpoint.channel_versions ?? {})) {
      const value = values.get(channel);
      if (value !== undefined) channelValues[channel] = await loaded(this.serde, value);
    }
    checkpoint.channel_values = channelValues;
    if (sends !== undefined) {
      checkpoint.channel_values[TASKS] = sends;
      const versions = Object.values(checkpoint.channel_versions ?? {});
      checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
    }
    writes.sort((a, b) => compareWritesSortKeys(sortKey(a), sortKey(b)));
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(
      writes.map(async (write) => [String(write.task_id), String(write.channel), await loaded(this.serde, write)] as CheckpointPendingWrite),
    );
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpointId } },
      checkpoint,
      metadata: (await loaded(this.serde, saved.metadata as Record<string, unknown>)) as CheckpointMetadata,
      pendingWrites,
    };
    if (typeof saved.parent === "string" && saved.parent) {
      tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: saved.parent } };
    }
    return tuple;
  }

  /**
   * Checkpoints newest first (by checkpoint id), of one thread (and namespace) or of all.
   *
   * Each thread is read once; a value its tip does not hold is looked up in the
   * value nodes' histories, all in one request, when first needed.
   */
  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    let { limit } = options;
    const { before, filter } = options;
    if (limit !== undefined && limit <= 0) return;
    const threadId = config?.configurable?.thread_id;
    const ns: string | undefined = config?.configurable?.checkpoint_ns;
    const wanted = config?.configurable ? getCheckpointId(config) : undefined;
    const beforeId = before?.configurable ? getCheckpointId(before) : undefined;
    const branches =
      threadId !== undefined && threadId !== null
        ? [threadBranch(String(threadId))]
        : (await this.repo.branches()).filter((name) => name.startsWith(THREADS_PREFIX) && !name.slice(THREADS_PREFIX.length).includes("/"));
    const found: [string, Record<string, unknown>, string, Snapshot][] = [];
    const writes = new Map<string, Record<string, unknown>[]>();
    for (const branch of branches) {
      const read = await this.#prefix(branch + "/", branch);
      if (read === null) continue;
      const snapshot = new Snapshot(this.repo, read.tip ?? branch);
      for (const node of read.nodes) {
        const depth = slashes(node.id);
        if (!isCheckpoint(node)) {
          if (depth === 4 || depth === 5) snapshot.byId.set(node.id, node);
          else if (depth === 6) {
            const owner = node.id.split("/").slice(0, 4).join("/");
            writes.set(owner, [...(writes.get(owner) ?? []), content(node)]);
          }
          continue;
        }
        const saved = content(node);
        if (atStableIds(saved)) snapshot.named(node.id, saved);
        if (ns !== undefined && saved.checkpoint_ns !== ns) continue;
        if (wanted && saved.checkpoint_id !== wanted) continue;
        if (beforeId && String(saved.checkpoint_id) >= beforeId) continue;
        found.push([String(saved.checkpoint_id), saved, node.id, snapshot]);
      }
    }
    found.sort((a, b) => (a[0] < b[0] ? 1 : a[0] > b[0] ? -1 : 0));
    for (const [, saved, nodeId, snapshot] of found) {
      if (filter && Object.keys(filter).length > 0) {
        const metadata = (await loaded(this.serde, saved.metadata as Record<string, unknown>)) as Record<string, unknown>;
        if (!Object.entries(filter).every(([key, value]) => metadata[key] === value)) continue;
      }
      const base = nodeId.slice(0, nodeId.lastIndexOf("/"));
      const values: Values = new Map();
      for (const [channel, writer] of Object.entries(writersOf(saved))) {
        const value = await snapshot.value(base, channel, writer, atStableIds(saved));
        if (value !== undefined) values.set(channel, content(value));
      }
      const record = saved.checkpoint as { json?: { v?: number } };
      let sends: unknown[] | undefined;
      if (typeof saved.parent === "string" && Number(record.json?.v ?? 4) < 4) {
        sends = await this.#sends(writes.get(`${base}/${segment(saved.parent)}`) ?? []);
      }
      yield await this.#tuple(saved, values, [...(writes.get(nodeId) ?? [])], sends);
      if (limit !== undefined && --limit <= 0) return;
    }
  }

  // -- writing ----------------------------------------------------------------------

  /** One write at a time per thread in this saver: its commits then never race each other. */
  async #turn<T>(threadId: string, work: () => Promise<T>): Promise<T> {
    const before = this.#turns.get(threadId) ?? Promise.resolve();
    const mine = before.then(work, work);
    const settled = mine.catch(() => undefined);
    this.#turns.set(threadId, settled);
    try {
      return await mine;
    } finally {
      if (this.#turns.get(threadId) === settled) this.#turns.delete(threadId);
    }
  }

  /**
   * Store a checkpoint: its node, the values that changed at their channels' ids, the namespace's pointer; one commit.
   *
   * A channel not in `newVersions` keeps the parent's value when the parent has it
   * at the same version (written again when its node holds another put's value);
   * otherwise it has no value (LangGraph.js's contract). The value nodes of
   * channels the checkpoint has no value for are dropped.
   */
  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const given = config.configurable?.thread_id;
    if (given === undefined || given === null) {
      throw new Error('put needs a thread: config.configurable.thread_id ({ configurable: { thread_id: "..." } })');
    }
    const threadId = String(given);
    const ns = String(config.configurable?.checkpoint_ns ?? "");
    const parent = config.configurable?.checkpoint_id as string | undefined;
    const checkpointId = String(checkpoint.id);
    const branch = threadBranch(threadId);
    const { channel_values: _values, ...rest } = checkpoint;
    const record = await stored(this.serde, rest);
    const meta = (metadata ?? {}) as Record<string, unknown>;
    const metaFields = await stored(this.serde, meta);
    const step = Number.isInteger(meta.step) ? (meta.step as number) : null;
    const runId = meta.run_id ?? null;
    const provenance = { agent_step: step, observation: runId === null ? null : String(runId), source: "langgraph" };
    const encoded = new Map<string, Record<string, unknown>>();
    const key = `${threadId}\u0000${ns}`;
    await this.#turn(threadId, async () => {
      for (let attempt = 0; attempt < TRIES; attempt++) {
        let known = this.#known.get(key);
        if (known === undefined) known = await this.#read(branch, ns);
        const base = known?.base ?? `${branch}/${namespaceSegment(ns)}`;
        const latest = known?.latest ?? null;
        const forked = parent !== undefined && latest !== null && parent !== latest;
        const message = checkpointMessage(meta, ns, checkpointId, parent, forked);
        const inherited = await this.#channelsOf(known, base, parent);
        const held = await this.#held(known, base);
        const { puts, located, gone } = await channelNodes(this.serde, base, checkpoint, newVersions, inherited, held, provenance, encoded);
        const fields = { threadId, ns, checkpointId, parent, runId };
        const node = checkpointNode(`${base}/${segment(checkpointId)}`, fields, record, metaFields, located, provenance);
        const newest = latest === null || latest < checkpointId;
        const pointer = { id: base + POINTER, content: { latest: checkpointId } } as NodeInput;
        let tip: string;
        try {
          tip = await this.#commit(branch, [node, ...puts, ...(newest ? [pointer] : [])], message, known?.tip, gone);
        } catch (error) {
          if (error instanceof RefConflict || (error instanceof NotFound && !(error instanceof Redacted))) {
            this.#forget(threadId); // another writer moved the thread: read again
            continue;
          }
          throw error;
        }
        this.#advance(threadId, tip);
        if (newest || latest === checkpointId) {
          const writes = !newest && known?.latest === checkpointId ? known.writes : undefined; // saved again: its writes stay
          this.#known.set(key, { tip, base, latest: checkpointId, channels: located, exact: true, metadata: meta, writes });
        } else {
          const entry = this.#known.get(key);
          if (entry !== undefined) entry.exact = false; // the value nodes now hold this checkpoint's values
        }
        return;
      }
      throw new RefConflict(`the thread ${JSON.stringify(threadId)} kept moving under ${TRIES} tries of its checkpoint ${checkpointId}`);
    });
    return { configurable: { thread_id: given, checkpoint_ns: ns, checkpoint_id: checkpointId } };
  }

  /** What a put needs to know of a namespace it has not written last: the tip, where the namespace is, its latest. */
  async #read(branch: string, ns: string): Promise<Known | undefined> {
    const tip = await this.repo.tip(branch);
    if (tip === null) return undefined;
    const { base, pointer } = await this.#namespaceAt(branch, ns, tip);
    const latest = pointer === null ? null : String(content(pointer).latest);
    return { tip, base, latest, channels: {}, exact: false, metadata: null, writes: undefined };
  }

  /** What the namespace's value nodes at the tip hold, by id: known after a put, else read (one request). */
  async #held(known: Known | undefined, base: string): Promise<Map<string, Located | null>> {
    if (known === undefined) return new Map();
    if (known.exact) {
      return new Map(Object.entries(known.channels).map(([channel, where]) => [stableId(base, channel), where]));
    }
    const held = new Map<string, Located | null>();
    for (const [id, node] of await this.#stable(base, known.tip)) {
      const fields = content(node);
      const writer = fields[WRITTEN_BY];
      held.set(id, writer === undefined || writer === null ? null : { writer: String(writer), version: fields.version });
    }
    return held;
  }

  /**
   * Where the parent checkpoint's channels have their values: known when it is the latest, else read.
   *
   * An ADR 33 parent's channels are named too: none of its values is at a channel's
   * id, so each one this checkpoint keeps is written again.
   */
  async #channelsOf(known: Known | undefined, base: string, parent: string | undefined): Promise<Record<string, Located>> {
    if (parent === undefined || known === undefined) return {};
    if (known.latest === parent && Object.keys(known.channels).length > 0) return known.channels;
    let node: Node | null;
    try {
      node = (await this.#get(`${base}/${segment(parent)}`, known.tip)).node;
    } catch (error) {
      if (error instanceof Redacted) return {}; // erased: this checkpoint stores the values in newVersions
      throw error;
    }
    if (node === null || !isCheckpoint(node)) return {};
    const saved = content(node);
    const versions = ((await loaded(this.serde, saved.checkpoint as Record<string, unknown>)) as Checkpoint).channel_versions ?? {};
    return Object.fromEntries(Object.entries(writersOf(saved)).map(([channel, writer]) => [channel, { writer, version: versions[channel] }]));
  }

  /** One commit on the thread's branch, on `tip` when given (`If-Match`); the new tip. */
  async #commit(branch: string, put: NodeInput[], message: string, tip: string | undefined, remove: string[] = []): Promise<string> {
    const send = () => this.repo.commit({ put, delete: remove, branch, message, author: this.author, ...(tip ? { parent: tip } : {}) });
    try {
      return (await send()).id;
    } catch (error) {
      // A thread's first commit starts its branch (a commit never creates one by itself).
      if (tip !== undefined || !(error instanceof NotFound) || (await this.repo.tip(branch)) !== null) throw error;
      try {
        await this.repo.branch(branch, { orphan: true, author: this.author });
      } catch {
        // another writer started it meanwhile: the commit says if anything else is wrong
      }
      return (await send()).id;
    }
  }

  /** After a commit of this saver on the thread: what it knows moves to the new tip. */
  #advance(threadId: string, tip: string): void {
    for (const [key, known] of this.#known) {
      if (key.startsWith(`${threadId}\u0000`)) known.tip = tip;
    }
  }

  #forget(threadId: string): void {
    for (const key of [...this.#known.keys()]) if (key.startsWith(`${threadId}\u0000`)) this.#known.delete(key);
  }

  /**
   * Where a checkpoint's node is (or goes) at the branch's tip, that tip, and the node.
   *
   * Under its namespace's readable id, or an earlier version's: where the node is,
   * else where the namespace's pointer is.
   */
  async #checkpointAt(branch: string, ns: string, checkpointId: string): Promise<{ id: string; tip: string | undefined; node: Node | null }> {
    const readable = `${branch}/${namespaceSegment(ns)}/${segment(checkpointId)}`;
    const found = await this.#get(readable, branch);
    const tip = found.tip ?? (await this.repo.tip(branch)) ?? undefined;
    if (found.node !== null || tip === undefined) return { id: readable, tip, node: found.node };
    const legacy = `${branch}/${segment(ns)}/${segment(checkpointId)}`;
    if (legacy === readable) return { id: readable, tip, node: null };
    const earlier = await this.#get(legacy, tip);
    if (earlier.node !== null) return { id: legacy, tip, node: earlier.node };
    const { base } = await this.#namespaceAt(branch, ns, tip);
    return { id: `${base}/${segment(checkpointId)}`, tip, node: null };
  }

  /** Store a task's pending writes for a checkpoint, one commit; a regular write already stored is kept once. */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    const given = config.configurable?.thread_id;
    if (given === undefined || given === null) throw new Error("putWrites needs a thread: config.configurable.thread_id");
    const checkpointId = config.configurable?.checkpoint_id as string | undefined;
    if (!checkpointId) throw new Error("putWrites needs the checkpoint the writes belong to: config.configurable.checkpoint_id");
    const threadId = String(given);
    const ns = String(config.configurable?.checkpoint_ns ?? "");
    const branch = threadBranch(threadId);
    const key = `${threadId}\u0000${ns}`;
    await this.#turn(threadId, async () => {
      for (let attempt = 0; attempt < TRIES; attempt++) {
        let known = this.#known.get(key);
        if (known !== undefined && known.latest !== checkpointId) known = undefined;
        let tip: string | undefined;
        let present: Set<string>;
        let step: unknown;
        let isStored = true;
        let taskBase: string;
        if (known !== undefined) {
          const nodeId = `${known.base}/${segment(checkpointId)}`;
          if (known.writes === undefined) {
            // The checkpoint's writes, read once: from then on its next writes read nothing.
            const found = await this.repo.nodesWithTip(nodeId + WRITES, { at: known.tip });
            known.writes = new Set(found.nodes.map((node) => node.id));
          }
          taskBase = `${nodeId}${WRITES}${segment(taskId)}`;
          tip = known.tip;
          present = known.writes;
          step = known.metadata?.step;
        } else {
          const checkpoint = await this.#checkpointAt(branch, ns, checkpointId);
          taskBase = `${checkpoint.id}${WRITES}${segment(taskId)}`;
          tip = checkpoint.tip;
          present = new Set();
          if (tip !== undefined) {
            present = new Set((await this.repo.nodesWithTip(taskBase + "/", { at: tip })).nodes.map((node) => node.id));
          }
          if (checkpoint.node !== null && isCheckpoint(checkpoint.node)) {
            const metadata = (await loaded(this.serde, content(checkpoint.node).metadata as Record<string, unknown>)) as Record<string, unknown>;
            step = metadata.step;
          } else isStored = false;
        }
        const puts = new Map<string, NodeInput>();
        for (const [position, [channel, value]] of writes.entries()) {
          const idx = WRITES_IDX_MAP[channel] ?? position;
          const id = `${taskBase}/${idx}`;
          if (idx >= 0 && present.has(id)) continue; // a regular write is stored once; a special one replaced
          puts.set(id, {
            id,
            content: { task_id: taskId, task_path: taskPath, channel, idx, ...(await stored(this.serde, value)) },
            provenance: { tool_call: taskPath || taskId, source: "langgraph" },
          } as NodeInput);
        }
        if (puts.size === 0) return;
        const message = writesMessage(writes as [string, unknown][], taskId, taskPath, checkpointId, step, isStored);
        let made: string;
        try {
          made = await this.#commit(branch, [...puts.values()], message, tip);
        } catch (error) {
          if (error instanceof RefConflict || (error instanceof NotFound && !(error instanceof Redacted) && tip !== undefined)) {
            this.#forget(threadId);
            continue;
          }
          throw error;
        }
        this.#advance(threadId, made);
        const now = this.#known.get(key);
        if (now !== undefined && now.latest === checkpointId && now.writes !== undefined) {
          for (const id of puts.keys()) now.writes.add(id);
        }
        return;
      }
      throw new RefConflict(`the thread ${JSON.stringify(threadId)} kept moving under ${TRIES} tries of its writes`);
    });
  }

  // -- deleting -----------------------------------------------------------------------

  /** Delete a thread: its branch goes (its commits leave the store with `mnemo gc`). */
  async deleteThread(threadId: string): Promise<void> {
    const id = String(threadId);
    this.#forget(id);
    await this.#turn(id, async () => {
      try {
        await this.repo.deleteBranch(threadBranch(id));
      } catch (error) {
        if (!(error instanceof NotFound) || error instanceof Redacted) throw error;
      }
    });
  }
}

function sortKey(write: Record<string, unknown>) {
  return writesSortKey(String(write.task_path ?? ""), String(write.task_id), Number(write.idx));
}
