// The owner's read-only view of how an agent's limits are enforced (GET /v1/owner/agents/{agent_id}/account, issue 24).
// In evm mode with agent accounts: the account, its signer and lane, and the caps, usage and exposure read from the
// chain, with the agentctl command that signs each owner change locally (the console shows these instead of signing;
// an account handed to a passkey (issue 27) has none: the console signs with the passkey). On the simulated chain the
// database enforces the limits shown.
import { existsSync } from 'node:fs';
import type { Db } from '../../db/knex.js';
import { findOwnerPasskey } from '../../db/repositories/passkey.repository.js';
import type { Schema } from '../../lib/contract.js';
import { devOwnerKeyPath } from '../../lib/owner-keys.js';
import type { PolicyService } from '../ledger/policy.js';
import type { CustodyService } from './accounts.js';

export type AccountView = Omit<Schema<'OwnerAccountView'>, 'ok'>;
type Command = AccountView['commands'][number];

/** Where the owner's key is, as a command should name it: the development key when it is on this machine. */
function keyFileOf(dataDir: string, ownerId: string): string {
  const dev = devOwnerKeyPath(dataDir, ownerId);
  return existsSync(dev) ? dev : 'OWNER_KEY_FILE';
}

/** Per owner change of `agentId`, the agentctl command that signs it with the owner's key (`keyFile`). */
export function ownerCommands(agentId: string, keyFile: string): Command[] {
  const k = `--owner-key-file ${keyFile}`;
  const run = (args: string) => `npm run --silent agentctl -- ${args} ${k}`;
  return [
    { action: 'set_policy', command: run(`agent set-policy ${agentId} --file policy.json`) },
    { action: 'add_destination', command: run(`destination add ${agentId} --kind crypto --chain base --address 0xADDRESS --label LABEL --timelock-seconds 86400`) },
    { action: 'add_recipient', command: run(`recipient add ${agentId} --kind recurring --name NAME --address 0xADDRESS`) },
    { action: 'cancel_one_off', command: run('one-off cancel ONE_OFF_PAYMENT_ID') },
    { action: 'pause', command: run(`agent disable ${agentId}`) },
    { action: 'resume', command: run(`agent enable ${agentId}`) },
    { action: 'rotate_lane_key', command: run(`agent rotate-lane-key ${agentId}`) },
  ];
}

export async function agentAccountView(db: Db, deps: { custody: CustodyService | null; policy: PolicyService; dataDir: string }, agentId: string): Promise<AccountView> {
  const acct = await deps.custody?.account(db, agentId);
  // Caps, usage and exposure: read from the account in evm mode (the policy service's chain mirror), else the database's.
  const { limits, usage, exposure_usd } = await deps.policy.allowance(db, agentId);
  if (!acct || !deps.custody) {
    return {
      agent_id: agentId,
      custody: 'database',
      account: null,
      owner_signer: null,
      owner_signer_kind: null,
      owner_passkey: null,
      agent_wrapper_address: null,
      agent_sender_address: null,
      deployed: null,
      paused: null,
      policy_version: null,
      limits,
      usage,
      exposure_usd: null,
      commands: [],
    };
  }
  const state = await deps.custody.state(acct.address);
  // Handed to a passkey (issue 27): the console signs with it, and no key file can.
  const passkey = acct.owner_passkey_id ? await findOwnerPasskey(db, acct.owner_id, acct.owner_passkey_id) : undefined;
  return {
    agent_id: agentId,
    custody: 'account',
    account: acct.address,
    owner_signer: state.owner ?? acct.signer_address ?? null,
    owner_signer_kind: passkey ? 'passkey' : (state.owner ?? acct.signer_address) ? 'key' : null,
    owner_passkey: passkey ? { id: passkey.id, credential_id: passkey.credential_id, name: passkey.name } : null,
    agent_wrapper_address: acct.address,
    agent_sender_address: state.lane ?? acct.lane_address ?? null,
    deployed: state.deployed,
    paused: state.deployed ? state.paused : false,
    policy_version: state.deployed ? state.policyVersion.toString() : null,
    limits,
    usage,
    exposure_usd,
    commands: passkey ? [] : ownerCommands(agentId, keyFileOf(deps.dataDir, acct.owner_id)),
  };
}
