#!/usr/bin/env bash
# Regenerates generated/openapi.json (bundled contract) and generated/api.d.ts (types) from
# openapi/, generated/vocabulary.ts (its enumerations as values) and the SDK's sdk/src/generated/. Run from the repository root. Never edit generated/ by hand.
set -euo pipefail

cd "$(dirname "$0")/.."
mkdir -p generated

npx --no-install redocly lint openapi/openapi.yaml
npx --no-install redocly bundle openapi/openapi.yaml -o generated/openapi.json
# Default flags, as an integrator runs it: request properties carry their `default` on a referenced
# schema, so defaults do not make request fields required (test/contract/generators.test.ts).
npx --no-install openapi-typescript generated/openapi.json -o generated/api.d.ts
# The document's enumerations as values (generated/vocabulary.ts).
node scripts/gen-vocabulary.mjs
# The SDK's types, operation table and CLI flags (sdk/src/generated/).
npx --no-install tsx sdk/scripts/generate.ts

# The bundle must be one self-contained document, and every /v1/agent operation must carry
# the three extensions the server reads at start-up (src/http/operations.ts).
node -e '
const doc = JSON.parse(require("fs").readFileSync("generated/openapi.json", "utf8"));
const problems = [];
const walk = (v, at) => {
  if (Array.isArray(v)) return v.forEach((x, i) => walk(x, at + "/" + i));
  if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) {
    if (k === "$ref" && typeof x === "string" && !x.startsWith("#/")) problems.push(at + ": external $ref " + x);
    walk(x, at + "/" + k);
  }
};
walk(doc, "#");
const methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
let count = 0;
for (const [path, item] of Object.entries(doc.paths)) {
  if (!/^\/v1\/(agent|owner|admin)\//.test(path)) continue;
  for (const m of methods) {
    const op = item[m];
    if (!op) continue;
    count++;
    for (const x of ["x-rate-limit-class", "x-required-scope", "x-idempotency"])
      if (op[x] === undefined) problems.push(m.toUpperCase() + " " + path + ": missing " + x);
  }
}
if (problems.length) { console.error(problems.join("\n")); process.exit(1); }
console.log("generated/openapi.json: " + count + " /v1/agent, /v1/owner and /v1/admin operations, all with x-rate-limit-class, x-required-scope, x-idempotency; no external refs");
'
