/**
 * What `list` reads of a thread: every node at one tip, and the value nodes' histories when needed (ADR 65).
 */
import type { Node, ServedRepo } from "../client.js";
import { WRITTEN_BY, channelNodeId, holds, pinnedId, stableId, writersOf } from "./layout.js";

/**
 * The values of every checkpoint of one thread, from one read of its nodes at a tip.
 *
 * A value the tip does not hold is looked up in the value nodes' histories, read
 * once, all together (one request), when first needed.
 */
export class Snapshot {
  readonly byId = new Map<string, Node>();
  readonly #named = new Set<string>();
  #history: Promise<Map<string, Node>> | undefined;

  constructor(
    readonly repo: ServedRepo,
    readonly tip: string,
  ) {}

  /** A checkpoint node of ADR 65 read: its channels' value ids are among those whose histories may be needed. */
  named(nodeId: string, saved: Record<string, unknown>): void {
    const base = nodeId.slice(0, nodeId.lastIndexOf("/"));
    for (const channel of Object.keys(writersOf(saved))) this.#named.add(stableId(base, channel));
  }

  /** The node holding `channel`'s value as `writer`'s put wrote it. */
  async value(base: string, channel: string, writer: string, stable: boolean): Promise<Node | undefined> {
    if (!stable) return this.byId.get(channelNodeId(base, writer, channel));
    const id = stableId(base, channel);
    const current = this.byId.get(id);
    if (holds(current, writer)) return current;
    const pinned = this.byId.get(pinnedId(base, writer, channel));
    if (pinned !== undefined) return pinned;
    this.#history ??= this.#histories();
    return (await this.#history).get(`${id}\u0000${writer}`);
  }

  async #histories(): Promise<Map<string, Node>> {
    const found = new Map<string, Node>();
    const ids = [...this.#named].sort();
    if (ids.length === 0) return found;
    for (const [id, history] of Object.entries(await this.repo.histories(ids, { at: this.tip }))) {
      for (const version of history.versions) {
        // newest first: the newest a writer wrote wins
        if (version.node === null || typeof version.node.content !== "object" || version.node.content === null) continue;
        const writer = String((version.node.content as Record<string, unknown>)[WRITTEN_BY]);
        if (!found.has(`${id}\u0000${writer}`)) found.set(`${id}\u0000${writer}`, version.node);
      }
    }
    return found;
  }
}
