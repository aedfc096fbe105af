/**
 * The ids and contents a saver writes and reads, as the Python saver's `thread_nodes` names them (ADRs 33, 65).
 *
 * Pure functions over nodes: the saver reads, asks here what to put and delete,
 * and makes one commit of it.
 */
import type { Checkpoint, ChannelVersions, SerializerProtocol } from "@langchain/langgraph-checkpoint";

import type { Node, NodeInput } from "../client.js";
import { channelSegment, segment } from "./names.js";
import { jsonForm, stored } from "./values.js";

/** What follows a checkpoint node's id in the ids of its pending writes. */
export const WRITES = "/w/";
/** What follows a checkpoint node's id in ADR 33's ids of its values (and a copy's pinned ones). */
export const CHANNELS = "/c/";
/** What follows a namespace's id in the id of the node naming its latest checkpoint. */
export const POINTER = "/~latest";
/** What follows a namespace's id in the ids of its channels' values (ADR 65). */
export const STABLE = "/~channels/";
/** The key of a value node naming the checkpoint whose put wrote it. */
export const WRITTEN_BY = "written_by";
/** The key of a checkpoint node naming, per channel, the checkpoint whose put wrote its value. */
export const VALUES_FROM = "values_from";

/** Where a channel of a checkpoint has its value: the checkpoint whose put wrote it, at which version. */
export interface Located {
  writer: string;
  version: unknown;
}

/** The id `channel`'s value has in the namespace whose id is `base`, whichever checkpoint wrote it. */
export function stableId(base: string, channel: string): string {
  return `${base}${STABLE}${channelSegment(channel)}`;
}

/** Where a copied thread keeps a value its tip does not hold: an id of the checkpoint that wrote it. */
export function pinnedId(base: string, writer: string, channel: string): string {
  return `${base}/${segment(writer)}${CHANNELS}${channelSegment(channel)}`;
}

/** ADR 33's id of the value the put of checkpoint `writer` stored for `channel`. */
export function channelNodeId(base: string, writer: string, channel: string): string {
  return `${base}/${segment(writer)}${CHANNELS}${segment(channel)}`;
}

export function content(node: Node): Record<string, unknown> {
  return node.content as Record<string, unknown>;
}

/** Whether `node` is a checkpoint (not a pointer, a value or a pending write). */
export function isCheckpoint(node: Node): boolean {
  return typeof node.content === "object" && node.content !== null && !Array.isArray(node.content) && "checkpoint" in node.content;
}

/** Whether a checkpoint node's values are at one id per channel (ADR 65; else ADR 33's ids). */
export function atStableIds(saved: Record<string, unknown>): boolean {
  return VALUES_FROM in saved;
}

/** Per channel, the checkpoint whose put wrote the value a checkpoint node has (either layout). */
export function writersOf(saved: Record<string, unknown>): Record<string, string> {
  const named = (saved[VALUES_FROM] ?? saved.channels ?? {}) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(named).map(([channel, writer]) => [channel, String(writer)]));
}

/** Whether a value node holds the value the put of checkpoint `writer` wrote. */
export function holds(node: Node | null | undefined, writer: string): node is Node {
  if (node === null || node === undefined || typeof node.content !== "object" || node.content === null) return false;
  return (node.content as Record<string, unknown>)[WRITTEN_BY] === writer;
}

export function slashes(id: string): number {
  let count = 0;
  for (const char of id) if (char === "/") count++;
  return count;
}

/**
 * The value nodes a put writes and drops, and where each channel of the checkpoint has its value.
 *
 * As the Python saver's `channel_nodes`: a channel keeps the parent's value
 * without a write when it is not in `newVersions`, the parent has it at the same
 * version, and its value node at the tip holds that value. A channel of the parent
 * at the same version whose node holds another put's value (after time travel) is
 * written again, so the commit holds every value of the checkpoint at its
 * channel's id; a value node of a channel the checkpoint has no value for is
 * dropped. LangGraph.js's contract (its validation suite) leaves out any other
 * channel not in `newVersions` (ADR 67).
 *
 * @param held the namespace's value nodes at the tip the put commits on, by id: which put wrote each.
 * @param encoded values already in stored form, by channel (filled in here: a retried put encodes once).
 */
export async function channelNodes(
  serde: SerializerProtocol,
  base: string,
  checkpoint: Checkpoint,
  newVersions: ChannelVersions,
  parent: Record<string, Located>,
  held: Map<string, Located | null>,
  provenance: Record<string, unknown>,
  encoded: Map<string, Record<string, unknown>>,
): Promise<{ puts: NodeInput[]; located: Record<string, Located>; gone: string[] }> {
  const checkpointId = String(checkpoint.id);
  const values = checkpoint.channel_values ?? {};
  const puts: NodeInput[] = [];
  const located: Record<string, Located> = {};
  const kept = new Set<string>();
  for (const [channel, version] of Object.entries(checkpoint.channel_versions ?? {})) {
    const id = stableId(base, channel);
    const inherited = parent[channel];
    const there = held.get(id);
    const same = inherited !== undefined && inherited.version === version;
    if (!(channel in newVersions) && same && there && there.writer === inherited.writer && there.version === version) {
      located[channel] = inherited;
      kept.add(id);
      continue;
    }
    if (!(channel in values) || (!(channel in newVersions) && !same)) continue;
    if (!encoded.has(channel)) encoded.set(channel, await stored(serde, values[channel]));
    puts.push({
      id,
      content: { channel, [WRITTEN_BY]: checkpointId, ...(jsonForm(version) ? { version } : {}), ...encoded.get(channel) },
      provenance,
    } as NodeInput);
    kept.add(id);
    located[channel] = { writer: checkpointId, version };
  }
  const gone = [...held.keys()].filter((id) => !kept.has(id));
  return { puts, located, gone };
}

/** The checkpoint node of a put: its ids, the checkpoint without values, the metadata, `values_from`. */
export function checkpointNode(
  id: string,
  fields: { threadId: string; ns: string; checkpointId: string; parent: string | undefined; runId: unknown },
  record: Record<string, unknown>,
  metadata: Record<string, unknown>,
  located: Record<string, Located>,
  provenance: Record<string, unknown>,
): NodeInput {
  return {
    id,
    content: {
      thread_id: fields.threadId,
      checkpoint_ns: fields.ns,
      checkpoint_id: fields.checkpointId,
      parent: fields.parent ?? null,
      run_id: fields.runId,
      checkpoint: record,
      metadata,
      [VALUES_FROM]: Object.fromEntries(Object.entries(located).map(([channel, where]) => [channel, where.writer])),
    },
    provenance,
  } as NodeInput;
}
