// LangGraph's own conformance suite for checkpointers, against a real `mnemo serve`.
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { inject } from "vitest";

import { connect, type ServedRepo } from "../src/index.js";
import { MnemosyneSaver } from "../src/langgraph/index.js";

let repo: ServedRepo;

validate({
  checkpointerName: "MnemosyneSaver",
  async beforeAll() {
    repo = await connect(inject("url"), { token: inject("tokens").saver as string });
  },
  async createCheckpointer() {
    // One tenant for the suite, cleared for each checkpointer: no thread of one is seen by the next.
    for (const name of await repo.branches()) if (name.startsWith("threads/")) await repo.deleteBranch(name);
    return new MnemosyneSaver(repo);
  },
});
