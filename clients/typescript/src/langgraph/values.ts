/**
 * A LangGraph value as node content, in the forms the Python saver writes and reads (ADRs 33 and 61).
 *
 *     {"json": VALUE}                                   an exact JSON form
 *     {"json": VALUE, "order": [KEYS, ...], "order_at": [[PATH, KEYS], ...]}
 *     {"langchain": VALUE_WITH_RECORDS, "order": ..., "order_at": ...}   messages as LangChain's records
 *     {"serde": TYPE, "bytes": BASE64}                  the serializer's bytes
 *
 * A value has an exact JSON form when it is built only of plain objects,
 * arrays, well-formed strings, finite numbers (integers within 2^53), booleans
 * and null, nested less than 56 deep: it comes back equal. The store keeps a
 * map's keys sorted, so an object whose keys were not sorted has its order
 * written beside the value, once per set of keys (`order`), and one whose keys
 * come in a second order by its path (`order_at`). Anything else (a Map, a
 * Date, `undefined` inside a value) is the bytes of the saver's serializer, but
 * for LangChain messages (`HumanMessage`, `AIMessage`,
 * `SystemMessage`, `ToolMessage`, exactly): a value holding them, exact but for
 * them, is `{"langchain": …}` with each message as the record Python's LangChain
 * writes (`["langchain", "schema", "messages", "AIMessage"]`, `kwargs` the fields
 * that differ from Python's defaults, and the type), as the Python saver stores it
 * (ADR 61), when the record makes the message again with every field the same.
 * Such a value, whichever language wrote it, is read back into @langchain/core messages.
 */
import { JsonPlusSerializer, type SerializerProtocol } from "@langchain/langgraph-checkpoint";

const MAX_DEPTH = 56;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Compare by code point, as Python orders text (the store's order of keys). */
export function byCodePoint(a: string, b: string): number {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = (x[i] as string).codePointAt(0)! - (y[i] as string).codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

const CONFLICT = "\u0000conflict";

function exact(value: unknown, orders: Map<string, string[]>, depth: number): boolean {
  switch (typeof value) {
    case "string":
      return value.isWellFormed();
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0) && (!Number.isInteger(value) || Number.isSafeInteger(value));
    case "object":
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (depth >= MAX_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      if (!(i in value) || !exact(value[i], orders, depth + 1)) return false;
    }
    return true;
  }
  if (!isPlainObject(value)) return false;
  const keys = Object.keys(value);
  if (Object.getOwnPropertySymbols(value).length > 0) return false;
  if (keys.some((key) => !key.isWellFormed())) return false;
  const shape = JSON.stringify([...keys].sort(byCodePoint));
  const first = orders.get(shape);
  if (first === undefined) orders.set(shape, keys);
  else if (JSON.stringify(first) !== JSON.stringify(keys)) orders.set(CONFLICT, []);
  return keys.every((key) => exact(value[key], orders, depth + 1));
}

function ordersAt(value: unknown, orders: Map<string, string[]>, path: (string | number)[], out: unknown[]): unknown[] {
  if (Array.isArray(value)) {
    value.forEach((item, index) => ordersAt(item, orders, [...path, index], out));
  } else if (isPlainObject(value)) {
    const keys = Object.keys(value);
    const first = orders.get(JSON.stringify([...keys].sort(byCodePoint)));
    if (JSON.stringify(first) !== JSON.stringify(keys)) out.push([path, keys]);
    for (const key of keys) ordersAt(value[key], orders, [...path, key], out);
  }
  return out;
}

/** `{"json": value}` (with `order` where needed) when `value` has an exact JSON form, else undefined. */
export function jsonForm(value: unknown, field = "json"): Record<string, unknown> | undefined {
  const orders = new Map<string, string[]>();
  if (!exact(value, orders, 0)) return undefined;
  const form: Record<string, unknown> = { [field]: value };
  const unsorted = [...orders.entries()]
    .filter(([shape, keys]) => shape !== CONFLICT && shape !== JSON.stringify(keys))
    .map(([, keys]) => keys);
  if (unsorted.length > 0) form.order = unsorted;
  if (orders.has(CONFLICT)) form.order_at = ordersAt(value, orders, [], []);
  return form;
}

/** The fields that store `value` in a node: JSON, else LangChain's records of its messages, else bytes. */
export async function stored(serde: SerializerProtocol, value: unknown): Promise<Record<string, unknown>> {
  const form = jsonForm(value);
  if (form !== undefined) return form;
  // Messages as records only under LangGraph's own serializer: an application's (one that
  // encrypts, say) keeps its bytes for them, as the Python saver decides (ADR 61).
  if (serde.constructor === JsonPlusSerializer) {
    const records = await withRecords(value);
    const readable = records === undefined ? undefined : jsonForm(records, "langchain");
    if (readable !== undefined) return readable;
  }
  const [type, bytes] = await serde.dumpsTyped(value);
  const data = typeof bytes === "string" ? Buffer.from(bytes, "utf8") : Buffer.from(bytes);
  return { serde: type, bytes: data.toString("base64") };
}

class StoredValueError extends Error {}

function reordered(value: Json, wanted: Map<string, string[]>): Json {
  if (Array.isArray(value)) return value.map((item) => reordered(item, wanted));
  if (value !== null && typeof value === "object") {
    const keys = wanted.get(JSON.stringify(Object.keys(value).sort(byCodePoint))) ?? Object.keys(value);
    const out: { [key: string]: Json } = {};
    for (const key of keys) out[key] = reordered(value[key] as Json, wanted);
    return out;
  }
  return value;
}

function orderedAt(value: Json, path: (string | number)[], keys: string[]): Json {
  if (path.length === 0) {
    const out: { [key: string]: Json } = {};
    for (const key of keys) out[key] = (value as { [key: string]: Json })[key] as Json;
    return out;
  }
  const [step, ...rest] = path;
  const parent = value as Record<string | number, Json>;
  if (parent === null || typeof parent !== "object" || !(String(step) in parent)) {
    throw new StoredValueError(`a stored LangGraph value has no ${JSON.stringify(path)} to order`);
  }
  parent[step as string] = orderedAt(parent[step as string] as Json, rest, keys);
  return value;
}

const MESSAGE_CLASSES = new Set([
  "AIMessage",
  "AIMessageChunk",
  "HumanMessage",
  "HumanMessageChunk",
  "SystemMessage",
  "SystemMessageChunk",
  "ToolMessage",
  "ToolMessageChunk",
  "ChatMessage",
  "ChatMessageChunk",
  "FunctionMessage",
  "FunctionMessageChunk",
  "RemoveMessage",
]);

// The record of each message class the Python saver writes (ADR 61): Python's class id, the
// message's type, and its fields beyond those of every message. The Python defaults of each
// field are left out of `kwargs`, as `message_forms.with_records` leaves them out.
const RECORDED: Record<string, { type: string; fields: string[] }> = {
  HumanMessage: { type: "human", fields: [] },
  SystemMessage: { type: "system", fields: [] },
  AIMessage: { type: "ai", fields: ["tool_calls", "invalid_tool_calls", "usage_metadata"] },
  ToolMessage: { type: "tool", fields: ["tool_call_id", "artifact", "status"] },
};
const COMMON_FIELDS = ["content", "additional_kwargs", "response_metadata", "name", "id"];
const EMPTY_BY_DEFAULT = new Set(["additional_kwargs", "response_metadata", "tool_calls", "invalid_tool_calls"]);
// What a message object holds beside its fields: LangChain.js's bookkeeping, rebuilt by its constructor.
const BOOKKEEPING = new Set(["lc_serializable", "lc_kwargs", "lc_namespace", "type", "lc_direct_tool_output"]);

class NoForm extends Error {}

function isDefault(field: string, value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (field === "status") return value === "success";
  if (EMPTY_BY_DEFAULT.has(field)) return JSON.stringify(value) === "{}" || JSON.stringify(value) === "[]";
  return false;
}

type MessageClasses = Record<string, new (fields: Record<string, unknown>) => Record<string, unknown>>;

/** The record of one message as Python's `dumpd` writes it, or NoForm when it would not come back equal. */
function record(message: Record<string, unknown>, name: string, classes: MessageClasses): Record<string, unknown> {
  const shape = RECORDED[name] as { type: string; fields: string[] };
  const fields = [...COMMON_FIELDS, ...shape.fields];
  if (Object.entries(message).some(([key, item]) => item !== undefined && !fields.includes(key) && !BOOKKEEPING.has(key))) {
    throw new NoForm(); // a field Python's class has not (a ToolMessage's `metadata`, say)
  }
  const kwargs: Record<string, unknown> = { type: shape.type };
  for (const field of fields) if (!isDefault(field, message[field])) kwargs[field] = message[field];
  const { type: _type, ...given } = kwargs;
  const again = new (classes[name] as MessageClasses[string])(given);
  // Exact only: the message its record makes again has every field the same (a default of
  // Python's that LangChain.js does not share, `status: "success"`, keeps the bytes).
  for (const field of fields) {
    if (JSON.stringify(again[field] ?? null) !== JSON.stringify(message[field] ?? null)) throw new NoForm();
  }
  const sorted = Object.fromEntries(Object.keys(kwargs).sort(byCodePoint).map((key) => [key, kwargs[key]]));
  return { id: ["langchain", "schema", "messages", name], kwargs: sorted, lc: 1, type: "constructor" };
}

function replaced(value: unknown, classes: MessageClasses, found: boolean[], depth: number): unknown {
  if (depth >= MAX_DEPTH) throw new NoForm();
  if (Array.isArray(value)) return value.map((item) => replaced(item, classes, found, depth + 1));
  if (isPlainObject(value)) {
    if ("lc" in value) throw new NoForm(); // a map of the value's own that a reader would take for a record
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, replaced(item, classes, found, depth + 1)]));
  }
  if (typeof value === "object" && value !== null) {
    const name = value.constructor?.name;
    if (name === undefined || !Object.hasOwn(RECORDED, name) || classes[name] !== value.constructor) throw new NoForm();
    found.push(true);
    return record(value as Record<string, unknown>, name, classes);
  }
  return value; // text, numbers, ...: jsonForm checks them
}

/** `value` with each LangChain message as its constructor record, or undefined when it holds none or one has no exact record. */
async function withRecords(value: unknown): Promise<unknown> {
  if (typeof value !== "object" || value === null) return undefined;
  let classes: MessageClasses;
  try {
    classes = (await import("@langchain/core/messages")) as unknown as MessageClasses;
  } catch {
    return undefined; // no @langchain/core: no message to find
  }
  const found: boolean[] = [];
  try {
    const out = replaced(value, classes, found, 0);
    return found.length > 0 ? out : undefined;
  } catch (error) {
    if (error instanceof NoForm) return undefined;
    throw error;
  }
}

async function revived(value: Json): Promise<unknown> {
  if (Array.isArray(value)) return Promise.all(value.map(revived));
  if (value !== null && typeof value === "object") {
    const id = value.id;
    if (value.lc === 1 && value.type === "constructor" && Array.isArray(id)) {
      const name = id[id.length - 1];
      if (typeof name !== "string" || !MESSAGE_CLASSES.has(name) || id.length !== 4 || id[0] !== "langchain") {
        throw new StoredValueError(`a stored LangChain record names no message class: ${JSON.stringify(id)}`);
      }
      const messages = (await import("@langchain/core/messages")) as unknown as Record<string, new (fields: unknown) => unknown>;
      const kwargs = { ...(value.kwargs as Record<string, unknown>) };
      delete kwargs.type;
      return new (messages[name] as new (fields: unknown) => unknown)(kwargs);
    }
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = await revived(item);
    return out;
  }
  return value;
}

/** A fresh copy of the value stored in `fields` (as read back from a node). */
export async function loaded(serde: SerializerProtocol, fields: Record<string, unknown>): Promise<unknown> {
  for (const field of ["json", "langchain"]) {
    if (field in fields) {
      let value = structuredClone(fields[field]) as Json;
      const order = fields.order ?? [];
      const orderAt = fields.order_at ?? [];
      if (!Array.isArray(order) || !Array.isArray(orderAt)) throw new StoredValueError("a stored value's order is not a list");
      if (order.length > 0) {
        value = reordered(value, new Map(order.map((keys: string[]) => [JSON.stringify([...keys].sort(byCodePoint)), keys])));
      }
      for (const [path, keys] of orderAt as [(string | number)[], string[]][]) value = orderedAt(value, path, keys);
      return field === "json" ? value : revived(value);
    }
  }
  const { serde: type, bytes } = fields;
  if (typeof type !== "string" || typeof bytes !== "string") {
    throw new StoredValueError(`a stored LangGraph value has neither 'json' nor 'serde' and 'bytes': ${Object.keys(fields).sort()}`);
  }
  return serde.loadsTyped(type, new Uint8Array(Buffer.from(bytes, "base64")));
}
