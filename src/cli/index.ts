// Every agentctl command module, one line per area.
import { foundationCommands } from './foundation.js';
import { ledgerCommands } from './ledger.js';
import { webhookCommands } from './webhooks.js';
import { oauthCommands } from './oauth.js';
import { defiCommands } from './defi.js';
import { chainCommands } from './chain.js';
import { policyCommands } from './policy.js';
import { approvalCommands } from './approvals.js';
import type { CliCommand } from './types.js';

export const commands: CliCommand[] = [...foundationCommands, ...ledgerCommands, ...webhookCommands, ...oauthCommands, ...defiCommands, ...chainCommands, ...policyCommands, ...approvalCommands];
