// An agent loop in TypeScript whose thread lives in a served Mnemosyne store.
//
//   MNEMO_URL=http://127.0.0.1:7777 MNEMO_TOKEN=mnemo_... npm run example -- agent-1
//
// then, beside the store: `mnemo log --thread agent-1` and `mnemo diff` of two of its steps.
import { connect } from "../src/index.js";
import { threadBranch } from "../src/langgraph/index.js";
import { runSteps } from "./steps.js";

const url = process.env.MNEMO_URL ?? "http://127.0.0.1:7777";
const token = process.env.MNEMO_TOKEN;
if (!token) {
  console.error("set MNEMO_TOKEN (mnemo token create --role write)");
  process.exit(2);
}
const thread = process.argv[2] ?? "agent-1";
const repo = await connect(url, { token });
const state = await runSteps(repo, thread);
console.log(JSON.stringify(state));
for await (const commit of repo.log({ at: threadBranch(thread), limit: 3 })) {
  console.log(commit.id.slice(0, 12), commit.message.split("\n")[0]);
}
