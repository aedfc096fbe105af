/**
 * The commit messages of a saver's commits, word for word as the Python saver writes them.
 *
 * `checkpoint step 3 (loop)` (`fork of <id>: …` for time travel, ` in <ns>` for a
 * subgraph's), then the ids; `writes of agent after step 2: messages, route`.
 */
import { shown } from "./names.js";

export function checkpointMessage(
  metadata: Record<string, unknown>,
  ns: string,
  checkpointId: string,
  parent: string | undefined,
  forked: boolean,
): string {
  const { step, source, run_id: runId } = metadata;
  let what = "checkpoint";
  if (Number.isInteger(step)) what += ` step ${step}`;
  if (typeof source === "string" && source) what += ` (${shown(source)})`;
  if (ns) what += ` in ${shown(ns, 80)}`;
  const first = forked && parent !== undefined ? `fork of ${shown(parent, 80)}: ${what}` : what;
  const body = [`checkpoint ${shown(checkpointId, 80)}`];
  if (parent !== undefined) body.push(`parent ${shown(parent, 80)}`);
  if (runId !== undefined && runId !== null) body.push(`run ${shown(String(runId), 80)}`);
  return `${first}\n\n${body.join("\n")}`;
}

const PULL_PATH = "~__pregel_pull, ";
const NULL_TASK = "00000000-0000-0000-0000-000000000000";
const UPDATE_PATH = "~__interrupt__, ";
const CHANNELS_SHOWN = 4;

export function writesMessage(
  writes: [string, unknown][],
  taskId: string,
  taskPath: string,
  checkpointId: string,
  step: unknown,
  stored: boolean,
): string {
  let who: string;
  if (taskPath.startsWith(PULL_PATH)) who = shown(taskPath.slice(PULL_PATH.length).split(", ", 1)[0] as string);
  else if (taskId === NULL_TASK || taskPath.startsWith(UPDATE_PATH)) who = "an update";
  else who = `task ${shown(taskId, 80)}`;
  let when: string;
  if (!stored) when = `ahead of checkpoint ${shown(checkpointId, 80)}`;
  else if (Number.isInteger(step)) when = `after step ${step}`;
  else when = `after checkpoint ${shown(checkpointId, 80)}`;
  const channels = [...new Set(writes.map(([channel]) => channel))];
  let named = channels.slice(0, CHANNELS_SHOWN).map((channel) => shown(String(channel))).join(", ");
  if (channels.length > CHANNELS_SHOWN) named += ` and ${channels.length - CHANNELS_SHOWN} more`;
  const body = [`task ${shown(taskId, 80)}`];
  if (taskPath) body.push(`path ${shown(taskPath, 80)}`);
  body.push(`checkpoint ${shown(checkpointId, 80)}`);
  return `writes of ${who} ${when}: ${named}\n\n${body.join("\n")}`;
}
