/**
 * `MnemosyneSaver`: LangGraph.js's checkpointer on a served store, laid out as the Python saver lays it out.
 *
 * The layout (ADRs 17, 28, 33; ADR 67 for this saver):
 *
 * - a thread is the branch `threads/<thread>`, each checkpoint one commit on it
 *   (`checkpoint step 3 (loop)`), so `mnemo log --thread <id>` is its history;
 * - a checkpoint is stored by channel: each channel LangGraph says changed
 *   (`newVersions`) is one node, `threads/<thread>/<ns>/<checkpoint>/c/<channel>`;
 *   the checkpoint node, `threads/<thread>/<ns>/<checkpoint>`, holds the checkpoint
 *   without its values, the metadata, and `channels`: for each channel, the
 *   checkpoint whose node holds its value; `threads/<thread>/<ns>/~latest` names
 *   the latest; pending writes are `…/<checkpoint>/w/<task>/<idx>`;
 * - values are stored as `values.ts` says: JSON where exact, else the serializer's bytes.
 *
 * Every write is one commit sent with `If-Match` (the tip the saver read, or
 * committed last): another writer's commit in between makes it read again and
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
import { checkpointMessage, writesMessage } from "./messages.js";
import { THREADS_PREFIX, segment, threadBranch } from "./names.js";
import { jsonForm, loaded, stored } from "./values.js";

const WRITES = "/w/";
const CHANNELS = "/c/";
const POINTER = "/~latest";
const TRIES = 8;

/** Where a channel of a checkpoint has its value: the checkpoint whose put stored it, at which version. */
interface Located {
  writer: string;
  version: unknown;
}

/** What the saver knows of a namespace's latest checkpoint after its own last commit on the thread. */
interface Known {
  tip: string;
  latest: string | null;
  channels: Record<string, Located>;
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

function channelNodeId(base: string, writer: string, channel: string): string {
  return `${base}/${segment(writer)}${CHANNELS}${segment(channel)}`;
}

function isCheckpoint(node: Node): boolean {
  return typeof node.content === "object" && node.content !== null && "checkpoint" in node.content;
}

function content(node: Node): Record<string, unknown> {
  return node.content as Record<string, unknown>;
}

function slashes(id: string): number {
  let count = 0;
  for (const char of id) if (char === "/") count++;
  return count;
}

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

  /** The checkpoint `config` names, or the latest of its thread and namespace. */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) return undefined;
    const ns = String(config.configurable?.checkpoint_ns ?? "");
    const branch = threadBranch(String(threadId));
    const base = `${branch}/${segment(ns)}`;
    let checkpointNode: string;
    let at: string | null = branch;
    const wanted = getCheckpointId(config);
    if (wanted) {
      checkpointNode = `${base}/${segment(wanted)}`;
    } else {
      const pointer = await this.#get(base + POINTER, branch);
      if (pointer.node === null) return undefined;
      checkpointNode = `${base}/${segment(String(content(pointer.node).latest))}`;
      at = pointer.tip;
    }
    let found: { nodes: Node[]; tip: string | null };
    try {
      found = await this.repo.nodesWithTip(checkpointNode, { at: at ?? branch });
    } catch (error) {
      if (error instanceof NotFound && !(error instanceof Redacted)) return undefined;
      throw error;
    }
    const tip = at !== branch && at !== null ? at : found.tip ?? branch;
    const mine = found.nodes.filter((node) => node.id === checkpointNode || node.id.startsWith(checkpointNode + "/"));
    const node = mine.find((one) => one.id === checkpointNode);
    if (node === undefined || !isCheckpoint(node)) return undefined;
    const own = new Map(mine.map((one) => [one.id, one]));
    const writes = mine.filter((one) => one.id.startsWith(checkpointNode + WRITES)).map(content);
    const saved = content(node);
    const named = (saved.channels ?? {}) as Record<string, string>;
    const values = new Map<string, Record<string, unknown>>();
    await Promise.all(
      Object.entries(named).map(async ([channel, writer]) => {
        const id = channelNodeId(base, String(writer), channel);
        const have = own.get(id) ?? (await this.#get(id, tip)).node;
        if (have !== null) values.set(channel, content(have)); // a node gone by hand leaves the channel empty
      }),
    );
    let sends: unknown[] | undefined;
    const record = saved.checkpoint as Record<string, unknown>;
    if (typeof saved.parent === "string" && Number((record.json as { v?: number } | undefined)?.v ?? 4) < 4) {
      const parentWrites = (await this.repo.nodesWithTip(`${base}/${segment(saved.parent)}${WRITES}`, { at: tip })).nodes;
      sends = await this.#sends(parentWrites.map(content));
    }
    return this.#tuple(saved, values, writes, sends);
  }

  async #get(id: string, at: string): Promise<{ node: Node | null; tip: string | null }> {
    try {
      return await this.repo.getWithTip(id, { at });
    } catch (error) {
      if (error instanceof NotFound && !(error instanceof Redacted)) return { node: null, tip: null };
      throw error;
    }
  }

  async #sends(writes: Record<string, unknown>[]): Promise<unknown[]> {
    const tasks = writes.filter((write) => write.channel === TASKS);
    tasks.sort((a, b) => compareWritesSortKeys(sortKey(a), sortKey(b)));
    return Promise.all(tasks.map((write) => loaded(this.serde, write)));
  }

  async #tuple(
    saved: Record<string, unknown>,
    values: Map<string, Record<string, unknown>>,
    writes: Record<string, unknown>[],
    sends: unknown[] | undefined,
  ): Promise<CheckpointTuple> {
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

  /** Checkpoints newest first (by checkpoint id), of one thread (and namespace) or of all. */
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
    const found: [string, Record<string, unknown>, string][] = [];
    const writes = new Map<string, Record<string, unknown>[]>();
    const channels = new Map<string, Record<string, unknown>>();
    for (const branch of branches) {
      let nodes: Node[];
      try {
        nodes = (await this.repo.nodesWithTip(branch + "/", { at: branch })).nodes;
      } catch (error) {
        if (error instanceof NotFound && !(error instanceof Redacted)) continue;
        throw error;
      }
      for (const node of nodes) {
        const depth = slashes(node.id);
        if (!isCheckpoint(node)) {
          if (depth === 5) channels.set(node.id, content(node));
          else if (depth === 6) {
            const owner = node.id.split("/").slice(0, 4).join("/");
            writes.set(owner, [...(writes.get(owner) ?? []), content(node)]);
          }
          continue;
        }
        const saved = content(node);
        if (ns !== undefined && saved.checkpoint_ns !== ns) continue;
        if (wanted && saved.checkpoint_id !== wanted) continue;
        if (beforeId && String(saved.checkpoint_id) >= beforeId) continue;
        found.push([String(saved.checkpoint_id), saved, node.id]);
      }
    }
    found.sort((a, b) => (a[0] < b[0] ? 1 : a[0] > b[0] ? -1 : 0));
    for (const [, saved, nodeId] of found) {
      if (filter && Object.keys(filter).length > 0) {
        const metadata = (await loaded(this.serde, saved.metadata as Record<string, unknown>)) as Record<string, unknown>;
        if (!Object.entries(filter).every(([key, value]) => metadata[key] === value)) continue;
      }
      const base = nodeId.slice(0, nodeId.lastIndexOf("/"));
      const values = new Map<string, Record<string, unknown>>();
      for (const [channel, writer] of Object.entries((saved.channels ?? {}) as Record<string, string>)) {
        const value = channels.get(channelNodeId(base, String(writer), channel));
        if (value !== undefined) values.set(channel, value);
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
   * Store a checkpoint: its node, the channels that changed, the namespace's pointer; one commit.
   *
   * A channel not in `newVersions` names the parent checkpoint's node when the
   * parent has it at the same version; otherwise it has no value (LangGraph.js's contract).
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
    const base = `${branch}/${segment(ns)}`;
    const { channel_values: channelValues, ...rest } = checkpoint;
    const record = await stored(this.serde, rest);
    const meta = (metadata ?? {}) as Record<string, unknown>;
    const metaFields = await stored(this.serde, meta);
    const step = Number.isInteger(meta.step) ? (meta.step as number) : null;
    const runId = meta.run_id ?? null;
    const provenance = { agent_step: step, observation: runId === null ? null : String(runId), source: "langgraph" };
    const encoded = new Map<string, Record<string, unknown>>();
    await this.#turn(threadId, async () => {
      for (let attempt = 0; attempt < TRIES; attempt++) {
        const key = `${threadId}\u0000${ns}`;
        let known = this.#known.get(key);
        if (known === undefined) known = await this.#read(branch, base);
        const latest = known?.latest ?? null;
        const forked = parent !== undefined && latest !== null && parent !== latest;
        const message = checkpointMessage(meta, ns, checkpointId, parent, forked);
        const inherited = await this.#channelsOf(known, base, parent);
        const puts: NodeInput[] = [];
        const located: Record<string, Located> = {};
        for (const [channel, version] of Object.entries(checkpoint.channel_versions ?? {})) {
          const kept = inherited[channel];
          if (!(channel in newVersions) && kept !== undefined && kept.version === version) {
            located[channel] = kept;
            continue;
          }
          // LangGraph.js's contract (its validation suite): a value not in `newVersions` is not
          // stored again; the Python saver stores it when the parent has no node for it (ADR 67).
          if (!(channel in newVersions) || !(channel in (channelValues ?? {}))) continue;
          if (!encoded.has(channel)) encoded.set(channel, await stored(this.serde, channelValues[channel]));
          puts.push({
            id: channelNodeId(base, checkpointId, channel),
            content: { channel, ...(jsonForm(version) ? { version } : {}), ...encoded.get(channel) },
            provenance,
          } as NodeInput);
          located[channel] = { writer: checkpointId, version };
        }
        const node = {
          id: `${base}/${segment(checkpointId)}`,
          content: {
            thread_id: threadId,
            checkpoint_ns: ns,
            checkpoint_id: checkpointId,
            parent: parent ?? null,
            run_id: runId,
            checkpoint: record,
            metadata: metaFields,
            channels: Object.fromEntries(Object.entries(located).map(([channel, where]) => [channel, where.writer])),
          },
          provenance,
        } as NodeInput;
        const newest = latest === null || latest < checkpointId;
        const pointer = { id: base + POINTER, content: { latest: checkpointId } } as NodeInput;
        let tip: string;
        try {
          tip = await this.#commit(branch, [node, ...puts, ...(newest ? [pointer] : [])], message, known?.tip);
        } catch (error) {
          if (error instanceof RefConflict || (error instanceof NotFound && !(error instanceof Redacted))) {
            this.#forget(threadId); // another writer moved the thread: read again
            continue;
          }
          throw error;
        }
        this.#advance(threadId, tip);
        if (newest) this.#known.set(key, { tip, latest: checkpointId, channels: located, metadata: meta, writes: undefined });
        return;
      }
      throw new RefConflict(`the thread ${JSON.stringify(threadId)} kept moving under ${TRIES} tries of its checkpoint ${checkpointId}`);
    });
    return { configurable: { thread_id: given, checkpoint_ns: ns, checkpoint_id: checkpointId } };
  }

  /** What a put needs to know of a namespace it has not written last: the tip and the latest checkpoint. */
  async #read(branch: string, base: string): Promise<Known | undefined> {
    const tip = await this.repo.tip(branch);
    if (tip === null) return undefined;
    const pointer = await this.#get(base + POINTER, tip);
    const latest = pointer.node === null ? null : String(content(pointer.node).latest);
    return { tip, latest, channels: {}, metadata: null, writes: undefined };
  }

  /** Where the parent checkpoint's channels have their values: known when it is the latest, else read. */
  async #channelsOf(known: Known | undefined, base: string, parent: string | undefined): Promise<Record<string, Located>> {
    if (parent === undefined || known === undefined) return {};
    if (known.latest === parent && Object.keys(known.channels).length > 0) return known.channels;
    let node: Node | null;
    try {
      node = (await this.#get(`${base}/${segment(parent)}`, known.tip)).node;
    } catch (error) {
      if (error instanceof Redacted) return {}; // erased: this checkpoint stores every value it has
      throw error;
    }
    if (node === null || !isCheckpoint(node)) return {};
    const saved = content(node);
    const versions = ((await loaded(this.serde, saved.checkpoint as Record<string, unknown>)) as Checkpoint).channel_versions ?? {};
    const named = (saved.channels ?? {}) as Record<string, string>;
    return Object.fromEntries(Object.entries(named).map(([channel, writer]) => [channel, { writer: String(writer), version: versions[channel] }]));
  }

  /** One commit on the thread's branch, on `tip` when given (`If-Match`); the new tip. */
  async #commit(branch: string, put: NodeInput[], message: string, tip: string | undefined): Promise<string> {
    const send = () => this.repo.commit({ put, branch, message, author: this.author, ...(tip ? { parent: tip } : {}) });
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

  /** Store a task's pending writes for a checkpoint, one commit; a regular write already stored is kept once. */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    const given = config.configurable?.thread_id;
    if (given === undefined || given === null) throw new Error("putWrites needs a thread: config.configurable.thread_id");
    const checkpointId = config.configurable?.checkpoint_id as string | undefined;
    if (!checkpointId) throw new Error("putWrites needs the checkpoint the writes belong to: config.configurable.checkpoint_id");
    const threadId = String(given);
    const ns = String(config.configurable?.checkpoint_ns ?? "");
    const branch = threadBranch(threadId);
    const checkpointNode = `${branch}/${segment(ns)}/${segment(checkpointId)}`;
    const taskBase = `${checkpointNode}${WRITES}${segment(taskId)}`;
    const key = `${threadId}\u0000${ns}`;
    await this.#turn(threadId, async () => {
      for (let attempt = 0; attempt < TRIES; attempt++) {
        let known = this.#known.get(key);
        if (known !== undefined && known.latest !== checkpointId) known = undefined;
        let tip: string | undefined;
        let present: Set<string>;
        let step: unknown;
        let isStored = true;
        if (known !== undefined) {
          if (known.writes === undefined) {
            // The checkpoint's writes, read once: from then on its next writes read nothing.
            const found = await this.repo.nodesWithTip(checkpointNode + WRITES, { at: known.tip });
            known.writes = new Set(found.nodes.map((node) => node.id));
          }
          tip = known.tip;
          present = known.writes;
          step = known.metadata?.step;
        } else {
          const checkpoint = await this.#get(checkpointNode, branch);
          tip = checkpoint.tip ?? (await this.repo.tip(branch)) ?? undefined;
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
