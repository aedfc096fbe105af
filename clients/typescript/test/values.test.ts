// Stored values in the forms the Python saver writes and reads (ADRs 33, 61, 67).
import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { JsonPlusSerializer } from "@langchain/langgraph-checkpoint";
import { describe, expect, it } from "vitest";

import { channelSegment, namespaceSegment, segment, threadBranch } from "../src/langgraph/index.js";
import { loaded, stored } from "../src/langgraph/values.js";

const serde = new JsonPlusSerializer();

describe("stored values", () => {
  it("keeps an exact JSON value as JSON, with the order of its keys", async () => {
    const value = { role: "user", content: "hi", nested: [{ b: 1, a: 2.5 }, { b: 3, a: 4 }] };
    const fields = await stored(serde, value);
    expect(fields).toEqual({ json: value, order: [["role", "content", "nested"], ["b", "a"]] });
    const back = (await loaded(serde, JSON.parse(JSON.stringify(fields)))) as typeof value;
    expect(JSON.stringify(back)).toBe(JSON.stringify(value)); // the same keys in the same order
  });

  it("stores what has no exact JSON form as the serializer's bytes", async () => {
    for (const value of [new Map([["a", 1]]), { a: undefined }, 2 ** 60, Number.NaN, "\ud800", [new HumanMessage("hi"), new Map()]]) {
      const fields = await stored(serde, value);
      expect(Object.keys(fields).sort()).toEqual(["bytes", "serde"]);
      const back = await loaded(serde, fields);
      if (typeof value === "number" && Number.isNaN(value)) continue; // JSON has no NaN: the serializer's own loss
      expect(back).toEqual(value);
    }
  });

  it("stores messages as the LangChain records the Python saver writes (ADR 61), and reads them back equal", async () => {
    const value = {
      messages: [
        new HumanMessage({ content: "hi", id: "m1" }),
        new AIMessage({ content: "ok", tool_calls: [{ name: "f", args: { a: 1 }, id: "c1", type: "tool_call" }] }),
        new ToolMessage({ content: "r", tool_call_id: "c1" }),
        new SystemMessage({ content: "s", name: "sys" }),
      ],
    };
    const fields = await stored(serde, value);
    // What mnemosyne.integrations.langgraph.stored_values.stored gives the same messages in Python:
    const record = (name: string, kwargs: Record<string, unknown>) => ({ id: ["langchain", "schema", "messages", name], kwargs, lc: 1, type: "constructor" });
    expect(JSON.stringify(fields)).toBe(
      JSON.stringify({
        langchain: {
          messages: [
            record("HumanMessage", { content: "hi", id: "m1", type: "human" }),
            record("AIMessage", { content: "ok", tool_calls: [{ name: "f", args: { a: 1 }, id: "c1", type: "tool_call" }], type: "ai" }),
            record("ToolMessage", { content: "r", tool_call_id: "c1", type: "tool" }),
            record("SystemMessage", { content: "s", name: "sys", type: "system" }),
          ],
        },
        order: [["name", "args", "id", "type"]],
      }),
    );
    const back = (await loaded(serde, JSON.parse(JSON.stringify(fields)))) as typeof value;
    expect(back).toEqual(value);
    expect(back.messages.map((message) => message.constructor)).toEqual([HumanMessage, AIMessage, ToolMessage, SystemMessage]);
  });

  it("keeps the bytes of messages whose record would not make them again, and under another serializer", async () => {
    class Own extends HumanMessage {}
    for (const value of [[new Own("hi")], [new ToolMessage({ content: "r", tool_call_id: "c1", status: "success" })], [{ lc: 1 }, new HumanMessage("hi")]]) {
      expect(Object.keys(await stored(serde, value)).sort()).toEqual(["bytes", "serde"]);
    }
    class Sealed extends JsonPlusSerializer {}
    expect(Object.keys(await stored(new Sealed(), [new HumanMessage("hi")])).sort()).toEqual(["bytes", "serde"]);
  });

  it("reads messages a Python saver stored as LangChain records", async () => {
    const record = { id: ["langchain", "schema", "messages", "HumanMessage"], kwargs: { content: "hi", type: "human" }, lc: 1, type: "constructor" };
    const [message] = (await loaded(serde, { langchain: [record] })) as HumanMessage[];
    expect(message).toBeInstanceOf(HumanMessage);
    expect(message?.content).toBe("hi");
    await expect(loaded(serde, { langchain: [{ ...record, id: ["os", "system"] }] })).rejects.toThrow(/names no message class/);
  });
});

describe("names", () => {
  it("are the Python saver's (values from mnemosyne.model.thread_names and threads.segment)", () => {
    expect(threadBranch("chat-7")).toBe("threads/chat-7");
    expect(threadBranch("user@example.com")).toBe("threads/_user_40example.com");
    expect(threadBranch("chat 1")).toBe("threads/_chat_201");
    expect(threadBranch("a/b")).toBe("threads/_a_2Fb");
    expect(threadBranch("x.")).toBe("threads/_x_2E");
    expect(threadBranch("a".repeat(100))).toBe(`threads/_${"a".repeat(45)}_x2816597888e4a0d3a36b82b83316ab32`);
    expect(segment("")).toBe("_e3b0c44298fc1c149afbf4c8996fb924");
    expect(segment("plain-name")).toBe("plain-name");
  });

  it("read namespaces and channels as their names, as the Python saver does (ADR 65; values from threads.py)", () => {
    const namespaces: Record<string, string> = {
      "": "_root",
      child: "child",
      "child:1ef-2": "_child:1ef-2",
      "a/b~c%d": "_a%2Fb%7Ec%25d",
      ["x".repeat(100)]: `_${"x".repeat(46)}~09ecb6ebc8bcefc733f6f2ec44f791ab`,
      ["é".repeat(60)]: `_${"é".repeat(23)}~f989aaf52260aef87908350aa7466526`,
      "tab\there": "_tab%09here",
      ".": "_%2E",
      root: "root",
      _root: "__root",
      ["a".repeat(79) + "/" + "b".repeat(10)]: `_${"a".repeat(46)}~44f64e0ed60104d6303e281e94e90b3d`,
      ["q:" + "\u{e0041}".repeat(3)]: "_q:%F3%A0%81%81%F3%A0%81%81%F3%A0%81%81",
    };
    for (const [ns, expected] of Object.entries(namespaces)) expect(namespaceSegment(ns), JSON.stringify(ns)).toBe(expected);
    const channels: Record<string, string> = {
      messages: "messages",
      __start__: "__start__",
      "branch:to:agent": "branch:to:agent",
      "a/b": "a%2Fb",
      "": "~",
      ".": "%2E",
      "..": "%2E%2E",
      "~": "%7E",
      ["z".repeat(46) + "%"]: "z".repeat(46) + "%25",
      ["é".repeat(50)]: `${"é".repeat(23)}~2d18fe4b61f0113952aaa8999ee5cfed`,
      "\u200bzero": "%E2%80%8Bzero",
      ["z".repeat(45) + "/" + "z".repeat(50)]: `${"z".repeat(45)}~1353f74b9b95e88b779ac2dee28e8292`,
      ["z".repeat(46) + "/" + "z".repeat(50)]: `${"z".repeat(46)}~870b78f9ab960402d77ee6e0fb2082f3`,
    };
    for (const [channel, expected] of Object.entries(channels)) expect(channelSegment(channel), JSON.stringify(channel)).toBe(expected);
  });
});
