// `npm test`: every test file, in parallel worker processes, the slowest first. Longest-first keeps a worker from
// picking up a minutes-long file (they spawn servers, CLIs and Anvil nodes) after the others have drained the queue.
// Paths are relative to the repository root, where npm runs mocha. SLOWEST is measured (per-file durations of a serial run, issue 17 item 8); files not listed follow in path order.
import { globSync, readFileSync } from 'node:fs';

const base = JSON.parse(readFileSync('.mocharc.json', 'utf8'));

const SLOWEST = [
  'test/owner/agentctl-remote.test.ts',
  // Issue 31: ten worker processes killed mid-batch (minutes on a busy machine), 60 s of payments against four settlers.
  'test/ledger/settlement-crash.test.ts',
  'test/ledger/settlement-batch.test.ts',
  'test/readme/readme.test.ts',
  'test/chain/start.test.ts',
  'test/foundation/embedded-lock.test.ts',
  'test/foundation/processes.test.ts',
  'test/owner/readme-agentctl.test.ts',
  'test/http/fuzz.test.ts',
  'test/foundation/agentctl.test.ts',
  'test/chain/crash.test.ts',
  'test/foundation/embedded.test.ts',
  'test/defi-chain/borrow.test.ts',
  'test/custody/drill.test.ts',
  'test/custody/account.test.ts',
  'test/chain/reconcile.test.ts',
  'test/console/console.test.ts',
  'test/defi-chain/earn.test.ts',
  'test/console/a11y.test.ts',
  'test/owner/owner-api.test.ts',
  'test/observability/tracing.test.ts',
  'test/chain/deposits.test.ts',
  'test/http/every-read.test.ts',
  'test/chain/stuck.test.ts',
  'test/ledger/http.test.ts',
  'test/oauth/discovery.test.ts',
  'test/chain/faults.test.ts',
  'test/observability/ops-config.test.ts',
  'test/foundation/npm-start.test.ts',
];

const all = globSync('test/**/*.test.ts').sort();
const spec = [...SLOWEST.filter((f) => all.includes(f)), ...all.filter((f) => !SLOWEST.includes(f))];

export default { ...base, parallel: true, jobs: 3, spec };
