// The client against a real `mnemo serve`: the Python client's methods, typed results, errors.
import { beforeAll, describe, expect, inject, it } from "vitest";

import { AccessDenied, InvalidInput, connect, NotFound, RefConflict, type ServedRepo } from "../src/index.js";

let repo: ServedRepo;
let reader: ServedRepo;

beforeAll(async () => {
  repo = await connect(inject("url"), { token: inject("tokens").client as string });
  reader = await connect(inject("url"), { token: inject("tokens").reader as string });
});

async function all<T>(found: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of found) out.push(item);
  return out;
}

describe("connect", () => {
  it("names the token's tenant and role", () => {
    expect([repo.tenant, repo.role, repo.readonly]).toEqual(["client", "admin", false]);
    expect(reader.readonly).toBe(true);
  });

  it("refuses a token the server does not honour, and another tenant", async () => {
    await expect(connect(inject("url"), { token: "mnemo_000000000000_nope" })).rejects.toBeInstanceOf(AccessDenied);
    await expect(connect(inject("url"), { token: inject("tokens").client as string, tenant: "other" })).rejects.toBeInstanceOf(NotFound);
    await expect(connect("ftp://x", { token: "t" })).rejects.toBeInstanceOf(InvalidInput);
  });
});

describe("a memory's life", () => {
  it("commits, reads, logs, diffs, blames and erases", async () => {
    const first = await repo.commit({ put: [{ id: "users/mira/city", content: "Lyon" }], message: "where Mira lives", branch: "life" }).catch(async (error) => {
      if (!(error instanceof NotFound)) throw error;
      await repo.branch("life", { orphan: true });
      return repo.commit({ put: [{ id: "users/mira/city", content: "Lyon" }], message: "where Mira lives", branch: "life" });
    });
    expect(first.created).toBe(true);
    const second = await repo.commit({ put: [{ id: "users/mira/city", content: "Paris" }], branch: "life", parent: first.id, message: "moved" });
    expect(second.parents).toEqual([first.id]);

    // a stale parent is refused, nothing written
    const stale = repo.commit({ put: [{ id: "users/mira/city", content: "Nice" }], branch: "life", parent: first.id });
    await expect(stale).rejects.toBeInstanceOf(RefConflict);
    await expect(stale).rejects.toMatchObject({ kind: "RefConflict", exitCode: 4, exit_code: 4, status: 412 });

    expect((await repo.get("users/mira/city", { at: "life" }))?.content).toBe("Paris");
    expect((await repo.get("users/mira/city", { at: first }))?.content).toBe("Lyon");
    expect(await repo.get("users/nobody", { at: "life" })).toBeNull();
    expect((await all(repo.log({ at: "life" }))).map((c) => c.message)).toEqual(["moved", "where Mira lives"]);
    expect((await all(repo.nodes({ at: "life", prefix: "users/" }))).map((n) => n.id)).toEqual(["users/mira/city"]);
    const diff = await repo.diff(first, second);
    expect(diff.modified.map((change) => [change.id, change.old?.content, change.new?.content])).toEqual([["users/mira/city", "Lyon", "Paris"]]);
    expect((await repo.history("users/mira/city", { at: "life" })).length).toBe(2);
    expect((await repo.blame("users/mira/city", { at: "life" })).commit.id).toBe(second.id);
    expect(await repo.tip("life")).toBe(second.id);
    expect(await repo.branches()).toContain("life");

    const hits = await repo.search("Paris", { at: "life", mode: "lexical" });
    expect(hits.map((hit) => hit.node.id)).toContain("users/mira/city");
    const packed = await repo.context("where does Mira live", { at: "life", budgetTokens: 200 });
    expect(packed.items.map((item) => item.id)).toContain("users/mira/city");

    await expect(reader.commit({ put: [{ id: "x", content: 1 }] })).rejects.toBeInstanceOf(AccessDenied);
    await expect(reader.get("users/mira/city", { at: "life" })).resolves.not.toBeNull();

    // several ids from one snapshot in one request; the ids alone; a branch's tip and erasures in one read
    const both = await repo.histories(["users/mira/city", "users/nobody"], { at: "life" });
    expect(Object.keys(both)).toEqual(["users/mira/city", "users/nobody"]);
    expect(both["users/mira/city"]?.node?.content).toBe("Paris");
    expect(both["users/mira/city"]?.versions.map((v) => v.node?.content)).toEqual(["Paris", "Lyon"]);
    expect(both["users/nobody"]?.node).toBeNull();
    expect((await repo.histories(["users/mira/city"], { at: first, limit: 0 }))["users/mira/city"]?.node?.content).toBe("Lyon");
    const listed = await repo.ids({ at: "life", prefix: "users/" });
    expect([listed.ids, listed.commit?.id]).toEqual([["users/mira/city"], second.id]);
    const fresh = await repo.freshness("life");
    expect(fresh.tip).toBe(second.id);
    expect((await repo.freshness("no-such-branch")).tip).toBeNull();

    const report = await repo.forget("users/mira/city", "Mira asked to be forgotten");
    expect(report.redactions.map((r) => r.id)).toEqual(["users/mira/city", "users/mira/city"]);
    await expect(repo.get("users/mira/city", { at: first })).rejects.toMatchObject({ kind: "Redacted", exitCode: 3, exit_code: 3, status: 410 });
    expect((await repo.freshness("life")).erasures).toBe(fresh.erasures + 2); // a reader's cache sees the erasure
  });
});
