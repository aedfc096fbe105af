// The layout of ADR 65 as the JS saver writes it: a channel's value at one id per namespace, and the
// commit of each checkpoint's put holding that checkpoint's values there, after time travel too.
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { expect, inject, it } from "vitest";

import { runSteps } from "../examples/steps.js";
import { connect, type ServedRepo } from "../src/index.js";
import { MnemosyneSaver } from "../src/langgraph/index.js";

/** Each checkpoint commit of a thread: its values_from against the value nodes its commit holds. */
async function valuesPerCommit(repo: ServedRepo, thread: string) {
  const out: { subject: string; named: Record<string, string>; held: Record<string, string> }[] = [];
  for await (const commit of repo.log({ at: `threads/${thread}` })) {
    if (!commit.message.includes("checkpoint step")) continue;
    const nodes = [];
    for await (const node of repo.nodes({ at: commit, prefix: `threads/${thread}/_root/` })) nodes.push(node);
    const id = /^checkpoint (\S+)$/m.exec(commit.message)?.[1] as string;
    const node = nodes.find((one) => one.id === `threads/${thread}/_root/${id}`);
    const held = Object.fromEntries(
      nodes
        .filter((one) => one.id.includes("/~channels/"))
        .map((one) => [(one.content as { channel: string }).channel, (one.content as { written_by: string }).written_by]),
    );
    out.push({ subject: commit.message.split("\n")[0] as string, named: (node?.content as { values_from: Record<string, string> }).values_from, held });
  }
  return out;
}

it("keeps a channel at one id, each checkpoint's commit holding its values, a fork's too", async () => {
  const repo = await connect(inject("url"), { token: (inject("tokens").graphs ?? inject("tokens").saver) as string });
  const thread = `layout-${Date.now()}`;
  await runSteps(repo, thread);
  const tip = await repo.resolve(`threads/${thread}`);
  const step3 = (await repo.diff(tip.parents[0] as string, tip.id)).modified.map((change) => change.id);
  const root = `threads/${thread}/_root`;
  expect(step3.sort()).toEqual([`${root}/~channels/count`, `${root}/~channels/messages`, `${root}/~channels/notes`, `${root}/~latest`]);

  // Time travel: a checkpoint whose parent is step 1's, changing nothing, is put as LangGraph.js would.
  const saver = new MnemosyneSaver(repo);
  const history = [];
  for await (const tuple of saver.list({ configurable: { thread_id: thread } })) history.push(tuple);
  const step1 = history.find((tuple) => tuple.metadata?.step === 1)!;
  const fork = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: step1.checkpoint.channel_values, channel_versions: step1.checkpoint.channel_versions };
  await saver.put(step1.config, fork, { source: "update", step: 2, parents: {} }, {});
  const forked = await saver.getTuple({ configurable: { thread_id: thread } });
  expect(forked?.checkpoint.channel_values).toEqual(step1.checkpoint.channel_values);
  for (const { subject, named, held } of await valuesPerCommit(repo, thread)) expect(held, subject).toEqual(named);

  // Every checkpoint reads back its own values, from the commit of its put.
  for (const tuple of history) {
    const again = await new MnemosyneSaver(repo).getTuple(tuple.config);
    expect(again?.checkpoint.channel_values, String(tuple.metadata?.step)).toEqual(tuple.checkpoint.channel_values);
  }
});

it("reads a thread of ADR 33's layout as it is, and goes on where it began", async () => {
  const repo = await connect(inject("url"), { token: (inject("tokens").graphs ?? inject("tokens").saver) as string });
  const thread = `earlier-${Date.now()}`;
  const base = `threads/${thread}/_e3b0c44298fc1c149afbf4c8996fb924`; // the root namespace's digest segment
  const first = uuid6(1);
  const record = { json: { v: 4, id: first, ts: "2026-01-01T00:00:00.000Z", channel_versions: { a: 1 }, versions_seen: {} } };
  await repo.branch(`threads/${thread}`, { orphan: true });
  await repo.commit({
    branch: `threads/${thread}`,
    message: "checkpoint step 0 (loop)",
    put: [
      {
        id: `${base}/${first}`,
        content: { thread_id: thread, checkpoint_ns: "", checkpoint_id: first, parent: null, run_id: null, checkpoint: record, metadata: { json: { step: 0 } }, channels: { a: first } },
      },
      { id: `${base}/${first}/c/a`, content: { channel: "a", version: 1, json: "hello" } },
      { id: `${base}/~latest`, content: { latest: first } },
    ],
  });
  const saver = new MnemosyneSaver(repo);
  const read = await saver.getTuple({ configurable: { thread_id: thread } });
  expect(read?.checkpoint.channel_values).toEqual({ a: "hello" });

  const next = { ...emptyCheckpoint(), id: uuid6(2), channel_values: { a: "hello", b: "x" }, channel_versions: { a: 1, b: 1 } };
  await new MnemosyneSaver(repo).put(read!.config, next, { source: "loop", step: 1, parents: {} }, { b: 1 });
  const after = await new MnemosyneSaver(repo).getTuple({ configurable: { thread_id: thread } });
  expect(after?.checkpoint.channel_values).toEqual({ a: "hello", b: "x" });
  const ids = [];
  for await (const node of repo.nodes({ at: `threads/${thread}` })) ids.push(node.id);
  expect(ids.filter((id) => id.includes("/~channels/"))).toEqual([`${base}/~channels/a`, `${base}/~channels/b`]);
  expect(ids.some((id) => id.includes("/_root/"))).toBe(false);
  expect((await new MnemosyneSaver(repo).getTuple(read!.config))?.checkpoint.channel_values).toEqual({ a: "hello" });
});
