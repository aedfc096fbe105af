// A LangGraph.js graph checkpointed over HTTP: the thread is a readable branch, a commit per step.
import { AIMessage } from "@langchain/core/messages";
import { expect, inject, it } from "vitest";

import { runSteps } from "../examples/steps.js";
import { connect } from "../src/index.js";

it("a graph's thread is a branch with a commit per checkpoint and per task's writes", async () => {
  const repo = await connect(inject("url"), { token: (inject("tokens").graphs ?? inject("tokens").saver) as string });
  const thread = process.env.MNEMO_STEPS_THREAD ?? `steps-${Date.now()}`;
  const state = await runSteps(repo, thread);
  expect(state.notes).toEqual(["start", "plan saw 0", "act saw 1", "review saw 2"]);
  expect(state.count).toBe(3);
  expect(state.messages.map((message) => [message.constructor, message.content])).toEqual([
    [AIMessage, "plan saw 0"],
    [AIMessage, "act saw 1"],
    [AIMessage, "review saw 2"],
  ]);
  const subjects = [];
  for await (const commit of repo.log({ at: `threads/${thread}` })) subjects.push(commit.message.split("\n")[0]);
  expect(subjects.reverse()).toEqual([
    "checkpoint step -1 (input)",
    "writes of __start__ after step -1: notes, count, branch:to:plan",
    "checkpoint step 0 (loop)",
    "writes of plan after step 0: notes, count, messages, branch:to:act",
    "checkpoint step 1 (loop)",
    "writes of act after step 1: notes, count, messages, branch:to:review",
    "checkpoint step 2 (loop)",
    "writes of review after step 2: notes, count, messages",
    "checkpoint step 3 (loop)",
  ]);
});
