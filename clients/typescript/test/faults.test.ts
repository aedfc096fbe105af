// Answers that are not the API (a proxy's page, a redirect, a stream cut short) and the server's
// refusals become the client's typed errors, as they do in the Python client
// (tests/test_client_faults.py); the only retries are those the API says are safe.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { AccessDenied, connect, MnemoError, NotFound, Redacted, RefConflict } from "../src/index.js";

const WHOAMI = {
  id: "0123456789ab",
  name: null,
  tenant: "default",
  role: "write",
  created_at: "2026-01-01T00:00:00Z",
  expires_at: null,
};

type Handler = (request: IncomingMessage, response: ServerResponse) => void;
let handler: Handler = () => undefined;
let server: Server;
let url: string;
const seen: string[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    seen.push(`${request.method} ${request.url}`);
    if (request.url === "/v1/whoami" && handler !== html && handler !== redirect) {
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(WHOAMI));
      return;
    }
    handler(request, response);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
});

const html: Handler = (_, response) => {
  response.writeHead(200, { "content-type": "text/html" }).end("<html><body>Sign in to the proxy</body></html>");
};
const redirect: Handler = (_, response) => {
  response.writeHead(301, { location: "https://elsewhere.example/v1/whoami", "content-length": "0" }).end();
};
const refusal = (status: number, kind: string, exitCode: number, headers: Record<string, string> = {}): Handler => (_, response) => {
  const body = JSON.stringify({ error: { kind, message: `refused: ${kind}`, exit_code: exitCode } });
  response.writeHead(status, { "content-type": "application/json", ...headers }).end(body);
};

async function thrown(work: () => Promise<unknown>): Promise<MnemoError> {
  try {
    await work();
  } catch (error) {
    expect(error).toBeInstanceOf(MnemoError);
    return error as MnemoError;
  }
  throw new Error("nothing was thrown");
}

describe("answers that are not the API", () => {
  it.each([
    ["html", html, /answered with no JSON \(text\/html\)/],
    ["redirect", redirect, /HTTP 301 \(a redirect, to https:\/\/elsewhere\.example\/v1\/whoami\).*not followed/],
  ])("a %s is one MnemoError naming the URL", async (_, misbehaving, message) => {
    handler = misbehaving;
    const error = await thrown(() => connect(url, { token: "mnemo_0123456789ab_x" }));
    expect(error.constructor).toBe(MnemoError);
    expect(error.kind).toBe("MnemoError");
    expect([error.exitCode, error.exit_code]).toEqual([1, 1]);
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain("\n");
  });

  it("a stream cut part-way is one MnemoError", async () => {
    handler = (_, response) => {
      response.writeHead(200, { "content-type": "application/jsonl", "content-length": "4000" });
      response.write('{"id": "ab');
      setTimeout(() => response.destroy(), 10);
    };
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    const error = await thrown(async () => {
      for await (const _ of repo.log()) void _;
    });
    expect(error.constructor).toBe(MnemoError);
    expect(error.message).toMatch(/cut short/);
  });

  it("a line that is not JSON in a stream is one MnemoError", async () => {
    handler = (_, response) => {
      response.writeHead(200, { "content-type": "application/jsonl" }).end("<html>\n");
    };
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    const error = await thrown(async () => {
      for await (const _ of repo.log()) void _;
    });
    expect(error.message).toMatch(/not JSON Lines/);
  });

  it("a stream's last line in the error form is that error", async () => {
    handler = (_, response) => {
      const lines = [JSON.stringify({ id: "x" }), JSON.stringify({ error: { kind: "CorruptObject", message: "bad bytes", exit_code: 5 } })];
      response.writeHead(200, { "content-type": "application/jsonl" }).end(lines.join("\n") + "\n");
    };
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    const got: unknown[] = [];
    const error = await thrown(async () => {
      for await (const node of repo.nodes()) got.push(node);
    });
    expect(got).toEqual([{ id: "x" }]);
    expect(error.kind).toBe("CorruptObject");
    expect(error.exitCode).toBe(5);
  });

  it("nothing listening is NotFound, as in Python", async () => {
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, "127.0.0.1", done));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((done) => closed.close(done));
    const error = await thrown(() => connect(`http://127.0.0.1:${port}`, { token: "t" }));
    expect(error).toBeInstanceOf(NotFound);
    expect(error.message).toMatch(/cannot reach/);
  });
});

describe("the error form", () => {
  it.each([
    [401, "AccessDenied", 7, AccessDenied],
    [410, "Redacted", 3, Redacted],
    [404, "NotFound", 3, NotFound],
    [412, "RefConflict", 4, RefConflict],
  ])("%i %s is its class, with its kind and exit code", async (status, kind, code, cls) => {
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    handler = refusal(status, kind, code);
    const error = await thrown(() => repo.blame("a"));
    expect(error).toBeInstanceOf(cls);
    expect([error.kind, error.exitCode, error.status]).toEqual([kind, code, status]);
    expect(error.exit_code).toBe(code); // the body's and Python's spelling reads the same code
  });

  it("a redacted version is NotFound too (its subclass), as in Python", async () => {
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    handler = refusal(410, "Redacted", 3);
    await expect(repo.get("a")).rejects.toBeInstanceOf(NotFound);
  });
});

describe("retries: only where the API says repeating is safe", () => {
  it("a 503 with Retry-After is sent again, a write too: the server refused it unread", async () => {
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    let calls = 0;
    handler = (request, response) => {
      calls++;
      if (calls === 1) return refusal(503, "MnemoError", 1, { "retry-after": "0" })(request, response);
      response.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ id: "c", created: true }));
    };
    const made = await repo.commit({ put: [{ id: "a", content: "x" }] });
    expect(made.id).toBe("c");
    expect(calls).toBe(2);
  });

  it("a 429 without Retry-After is not repeated", async () => {
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    let calls = 0;
    handler = (request, response) => {
      calls++;
      refusal(429, "MnemoError", 1)(request, response);
    };
    await thrown(() => repo.blame("a"));
    expect(calls).toBe(1);
  });

  it("a read whose connection dropped is sent again; a write never is", async () => {
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    let calls = 0;
    handler = (request, response) => {
      calls++;
      if (calls === 1 || request.method === "POST") {
        request.socket.destroy();
        return;
      }
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: "a", lines: [] }));
    };
    expect(await repo.blame("a")).toEqual({ id: "a", lines: [] });
    expect(calls).toBe(2);
    calls = 0;
    const error = await thrown(() => repo.commit({ put: [{ id: "a", content: "x" }] }));
    expect(error.constructor).toBe(MnemoError);
    expect(calls).toBe(1);
  });

  it("a read sent as a POST (histories) is a read: sent again when its connection dropped", async () => {
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    let calls = 0;
    handler = (request, response) => {
      calls++;
      if (calls === 1) {
        request.socket.destroy();
        return;
      }
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ a: { id: "a", node: null, versions: [] } }));
    };
    expect(await repo.histories(["a"])).toEqual({ a: { id: "a", node: null, versions: [] } });
    expect(calls).toBe(2);
  });

  it("If-Match carries the expected parent", async () => {
    const repo = await connect(url, { token: "mnemo_0123456789ab_x" });
    let ifMatch: string | undefined;
    handler = (request, response) => {
      ifMatch = request.headers["if-match"] as string | undefined;
      refusal(412, "RefConflict", 4)(request, response);
    };
    const parent = "a".repeat(64);
    await expect(repo.commit({ put: [{ id: "a", content: "x" }], parent })).rejects.toBeInstanceOf(RefConflict);
    expect(ifMatch).toBe(`"${parent}"`);
  });
});
