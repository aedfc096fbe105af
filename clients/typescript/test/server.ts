// Vitest's global setup: a real `mnemo serve` on a free loopback port, over a fresh store, with tokens.
//
// The Python that runs it: MNEMO_PYTHON, else the repository's .venv (what `make` installs).
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    url: string;
    tokens: Record<string, string>;
  }
}

export function python(): string {
  const found = process.env.MNEMO_PYTHON ?? resolve(import.meta.dirname, "../../../.venv/bin/python");
  if (!existsSync(found)) throw new Error(`no Python with mnemosyne at ${found} (run make test, which builds .venv, or set MNEMO_PYTHON)`);
  return found;
}

/** A store with tokens, served: the URL, the tokens by name, and how to stop it. */
export async function serve(tenants: [string, string, string][]): Promise<{ url: string; tokens: Record<string, string>; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "mnemo-ts-"));
  const store = join(dir, "store");
  const made = execFileSync(python(), [
    "-c",
    "import json, sys\nfrom mnemosyne import Store\n" +
      "with Store.init(sys.argv[1]) as s:\n" +
      "    for t in sorted({t for _, t, _ in json.loads(sys.argv[2])} - set(s.tenants())): s.create_tenant(t)\n" +
      "    print(json.dumps({n: s.create_token(t, r, name=n).token for n, t, r in json.loads(sys.argv[2])}))",
    store,
    JSON.stringify(tenants),
  ]);
  const tokens = JSON.parse(made.toString()) as Record<string, string>;
  const child: ChildProcess = spawn(python(), ["-m", "mnemo_cli", "--repo", store, "serve", "--port", "0"], {
    env: { ...process.env, MNEMO_EMBEDDER: "none" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const lines = createInterface({ input: child.stderr! });
  const seen: string[] = [];
  const url = await new Promise<string>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`mnemo serve did not start: ${seen.join("\n")}`)), 30_000);
    lines.on("line", (line) => {
      seen.push(line);
      const found = /^serving .* on (http:\/\/\S+)\/v1 /.exec(line);
      if (found) {
        clearTimeout(timer);
        done(found[1] as string);
      }
    });
    child.on("exit", (code) => fail(new Error(`mnemo serve exited (${code}): ${seen.join("\n")}`)));
  });
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
    if (seen.some((line) => line.includes("Traceback"))) throw new Error(`mnemo serve wrote a traceback:\n${seen.join("\n")}`);
  };
  return { url, tokens, stop };
}

export default async function setup(project: TestProject) {
  // A server someone else runs (tests/test_typescript.py's, with Python's side of a test on it).
  if (process.env.MNEMO_URL && process.env.MNEMO_TOKENS) {
    project.provide("url", process.env.MNEMO_URL);
    project.provide("tokens", JSON.parse(process.env.MNEMO_TOKENS) as Record<string, string>);
    return;
  }
  const served = await serve([
    ["client", "client", "admin"],
    ["reader", "client", "read"],
    ["saver", "saver", "write"], // the validation suite's: it clears the tenant's threads for each checkpointer
    ["graphs", "graphs", "write"], // the graphs of the other files, apart from those clearings
  ]);
  project.provide("url", served.url);
  project.provide("tokens", served.tokens);
  return served.stop;
}
