// What agentctl's commands use only when they run on the database themselves (no server answering, or the chain's
// operator commands): the repositories, services, chain client and viem. Loaded on first use through `onDatabase()`,
// so a command sent to a server starts without them: loading them was ~0.45 s of CPU of every agentctl call.
export { getAddress, parseUnits } from 'viem';
export { accrueDevVault, bootstrapDevChain, createChainClient, faucet, resolveChainId, resolveRelayer } from '../chain/connect.js';
export { findAgent } from '../db/repositories/agent.repository.js';
export { findApproval } from '../db/repositories/approval.repository.js';
export { findAsset } from '../db/repositories/ledger.repository.js';
export { findVault, findVaultByAddress } from '../db/repositories/vault.repository.js';
export { createSealer } from '../lib/crypto.js';
export { createLogger } from '../lib/logger.js';
export { OAuthInputError } from '../oauth/oauth.service.js';
export { spendApprovalOf } from '../services/custody/spend-approval.js';
export { policyToJson } from '../services/ledger/policy.js';
