// Every service the handlers, the worker and agentctl reach through `ctx.services`. One field per area.
import type { OAuthService } from './oauth.types.js';
import type { RateLimitService } from '../ratelimit/rate-limit.service.js';
import type { AgentService } from './agent.service.js';
import type { ChainInbound } from './chain-inbound.js';
import type { SimulationService } from './simulate-onchain.service.js';
import type { DefiArea } from './defi/area.js';
import type { EventService } from './event.service.js';
import type { LedgerArea } from './ledger/area.js';
import type { OwnerService } from './owner.service.js';
import type { OwnerOverviewService } from './owner-overview.service.js';
import type { PasskeyService } from './passkey.service.js';
import type { SelfService } from './self.service.js';
import type { WebhookService } from './webhook.service.js';
import type { X402Service } from './x402/service.js';
import type { CustodyService } from './custody/accounts.js';

export interface Services {
  oauth: OAuthService;
  agents: AgentService;
  ledger: LedgerArea;
  self: SelfService;
  rateLimits: RateLimitService;
  webhooks: WebhookService;
  defi: DefiArea;
  x402: X402Service;
  owner: OwnerService;
  /** The owner's overview and spending per day (the console's overview and chart). */
  ownerOverview: OwnerOverviewService;
  /** Owners' passkeys: sign-in and the step-up approvals require (issue 27). */
  passkeys: PasskeyService;
  events: EventService;
  /** evm mode with agent accounts (issue 24): the owner's signed changes relayed to each agent's account; else null. */
  custody: CustodyService | null;
  /** evm mode (CHAIN_RPC_URL): deposits, reconciliation, x402 settlement tracking; null on the simulated chain. */
  inbound: ChainInbound | null;
  /** Simulate `depth: onchain`. */
  simulation: SimulationService;
}
