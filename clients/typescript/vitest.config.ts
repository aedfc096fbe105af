import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globals: true, // the checkpoint validation suite calls describe/it/expect as globals
    globalSetup: ["./test/server.ts"],
    include: ["test/**/*.test.ts"],
    // Node's fetch keeps connections per process: tests share one server, in a few forks.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
