// The checked-in types are what openapi-typescript makes of the live /v1/openapi.json:
// a route or a schema that changes without `node scripts/generate.mjs URL` fails here.
import { readFile } from "node:fs/promises";
import { expect, inject, it } from "vitest";

// @ts-expect-error: a plain JavaScript module (the generator script), typed by its use here
import { SCHEMA, load, schemaSource } from "../scripts/generate.mjs";

it("src/schema.ts is generated from the live OpenAPI document", async () => {
  const live = (await schemaSource(await load(inject("url")))) as string;
  const checkedIn = await readFile(SCHEMA as string, "utf8");
  expect(checkedIn === live, "src/schema.ts drifted from /v1/openapi.json: run `node scripts/generate.mjs URL` and commit").toBe(true);
});
