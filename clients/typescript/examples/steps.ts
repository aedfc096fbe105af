// A three-step LangGraph.js graph whose checkpoints are kept in a served Mnemosyne store.
//
// Each step appends a note and a message, and counts: the same graph as tests/test_typescript.py
// runs in Python, so `mnemo diff` of two steps of either thread reads alike (the messages as
// LangChain's records in both).
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

import type { ServedRepo } from "../src/index.js";
import { MnemosyneSaver } from "../src/langgraph/index.js";

const State = Annotation.Root({
  notes: Annotation<string[]>({ reducer: (old, more) => old.concat(more), default: () => [] }),
  count: Annotation<number>({ reducer: (_, now) => now, default: () => 0 }),
  messages: Annotation<BaseMessage[]>({ reducer: (old, more) => old.concat(more), default: () => [] }),
});

const step = (name: string) => (state: typeof State.State) => ({
  notes: [`${name} saw ${state.count}`],
  count: state.count + 1,
  messages: [new AIMessage(`${name} saw ${state.count}`)],
});

/** Run the graph once on `threadId`, checkpointed in `repo`; its final state. */
export async function runSteps(repo: ServedRepo, threadId: string) {
  const graph = new StateGraph(State)
    .addNode("plan", step("plan"))
    .addNode("act", step("act"))
    .addNode("review", step("review"))
    .addEdge(START, "plan")
    .addEdge("plan", "act")
    .addEdge("act", "review")
    .addEdge("review", END)
    .compile({ checkpointer: new MnemosyneSaver(repo) });
  return graph.invoke({ notes: ["start"], count: 0 }, { configurable: { thread_id: threadId }, durability: "sync" });
}
