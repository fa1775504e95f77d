// agentctl for the chain (evm mode): reconcile on-chain balances with the ledger.
import { findAgent } from '../db/repositories/agent.repository.js';
import { CliUsageError, optionalFlag, type CliCommand } from './types.js';

export const chainCommands: CliCommand[] = [
  {
    name: 'chain reconcile',
    usage: 'chain reconcile [--agent AGENT_ID]',
    run: async (ctx, args) => {
      const inbound = ctx.services.inbound;
      if (!inbound) throw new CliUsageError('chain reconcile needs an EVM chain: set CHAIN_RPC_URL');
      const agentId = optionalFlag(args, 'agent');
      if (agentId !== undefined && !(/^[0-9a-f-]{36}$/i.test(agentId) && (await findAgent(ctx.db, agentId)))) throw new CliUsageError(`agent ${agentId} not found`);
      return { ...(await inbound.reconciler.run({ agentId })) };
    },
  },
];
