// viem, loaded on first use (issue 12 P4): with its dependencies it is ~6.5 MB of heap that a server on the simulated
// chain answering reads never needs. Every module of src/ takes viem's values from here and imports its types with
// `import type`, so a process holds one copy (the CommonJS build; a static `import` beside it would add the ESM build).
import { createRequire } from 'node:module';
import type * as Viem from 'viem';
import type * as ViemAccounts from 'viem/accounts';

const load = createRequire(import.meta.url);

/** The `viem` entry, required on the first call (Node's require cache keeps the one copy; no state of ours). */
export const viem = (): typeof Viem => load('viem') as typeof Viem;
/** The `viem/accounts` entry (keys and local signing), required on the first call. */
export const viemAccounts = (): typeof ViemAccounts => load('viem/accounts') as typeof ViemAccounts;
