// A served checkpoint put and get_tuple from TypeScript: bench/checkpointer.py's thread, over HTTP.
//
//   node dist/bench/checkpointer.js URL TOKEN ROUNDS BLOCKS
//
// The same thread as the Python rows (20 channels, three changing per step, a growing
// message list): after a warm-up of 50 steps, blocks of puts, each followed by five
// get_tuple of the latest. Prints one JSON line: the medians in microseconds and the
// requests a put, a get_tuple right after it, and another send. bench/checkpointer.py
// builds this file (tsc -p tsconfig.build.json) and runs it against its server.
import type { RunnableConfig } from "@langchain/core/runnables";
import { emptyCheckpoint, uuid6, type CheckpointMetadata } from "@langchain/langgraph-checkpoint";

import { connect } from "../src/index.js";
import { MnemosyneSaver } from "../src/langgraph/index.js";

const CHANNELS = 20;
const CHANGED = 3;

function values(step: number): Record<string, unknown> {
  const found: Record<string, unknown> = {
    messages: Array.from({ length: Math.min(step, 12) + 1 }, (_, i) => ({
      role: i % 2 === 0 ? "user" : "assistant",
      content: `message ${i}: ` + "words ".repeat(20),
    })),
    step,
  };
  const fixed = Object.keys(found).length;
  for (let c = 0; c < CHANNELS - fixed; c++) {
    found[`field_${String(c).padStart(2, "0")}`] = `channel ${c} at step ${step - (step % (c + 2))} `.repeat(6).slice(0, 240);
  }
  return found;
}

/** One thread's checkpoints, put and read back the way a running graph does. */
class Thread {
  config: RunnableConfig;
  readonly versions: Record<string, number> = {};
  step = 0;

  constructor(
    readonly saver: MnemosyneSaver,
    readonly threadId: string,
  ) {
    this.config = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
  }

  async put(): Promise<void> {
    this.step += 1;
    const now = values(this.step);
    const names = Object.keys(now);
    const changed = [...names.slice(0, CHANGED - 1), names[2 + (this.step % (CHANNELS - 2))] as string];
    for (const name of names) {
      if (!(name in this.versions) || changed.includes(name)) this.versions[name] = (this.versions[name] ?? 0) + 1;
    }
    const checkpoint = emptyCheckpoint();
    checkpoint.id = uuid6(this.step);
    checkpoint.channel_values = now;
    checkpoint.channel_versions = { ...this.versions };
    const fresh = Object.fromEntries(changed.map((name) => [name, this.versions[name] as number]));
    const metadata = { source: "loop", step: this.step, parents: {} } as CheckpointMetadata;
    this.config = await this.saver.put(this.config, checkpoint, metadata, fresh);
  }

  async get(): Promise<void> {
    const found = await this.saver.getTuple({ configurable: { thread_id: this.threadId } });
    if (found?.checkpoint.channel_values.step !== this.step) throw new Error(`read step ${found?.checkpoint.channel_values.step}, not ${this.step}`);
  }
}

async function timed(action: () => Promise<void>, times: number, into: number[]): Promise<void> {
  for (let i = 0; i < times; i++) {
    const start = process.hrtime.bigint();
    await action();
    into.push(Number(process.hrtime.bigint() - start) / 1000);
  }
}

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

async function main(): Promise<void> {
  const [url, token, rounds = "200", blocks = "5"] = process.argv.slice(2);
  if (!url || !token) throw new Error("usage: node dist/bench/checkpointer.js URL TOKEN [ROUNDS] [BLOCKS]");
  let sent = 0;
  const counting: typeof fetch = (input, init) => {
    sent++;
    return fetch(input, init);
  };
  const repo = await connect(url, { token, fetch: counting });
  const thread = new Thread(new MnemosyneSaver(repo), `ts-thread-${process.pid}`);
  for (let i = 0; i < 50; i++) {
    await thread.put();
    await thread.get();
  }
  const perBlock = Math.max(Math.floor(Number(rounds) / Number(blocks)), 1);
  const puts: number[] = [];
  const gets: number[] = [];
  for (let block = 0; block < Number(blocks); block++) {
    await timed(() => thread.put(), perBlock, puts);
    await timed(() => thread.get(), perBlock * 5, gets);
  }
  const trips = async (work: () => Promise<void>) => {
    const before = sent;
    await work();
    return sent - before;
  };
  const putTrips = await trips(() => thread.put());
  const firstGet = await trips(() => thread.get());
  const getTrips = await trips(() => thread.get());
  console.log(JSON.stringify({ put_us: median(puts), get_us: median(gets), put_trips: putTrips, first_get: firstGet, get_trips: getTrips }));
}

await main();
