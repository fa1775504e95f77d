// Every handler module, merged by operationId. One line per tag file; a missing export answers 501.
import type { HandlerMap } from '../http/types.js';
import * as admin from './admin.js';
import * as agent from './agent.js';
import * as account from './account.js';
import * as activity from './activity.js';
import * as borrow from './borrow.js';
import * as conversions from './conversions.js';
import * as deposits from './deposits.js';
import * as earn from './earn.js';
import * as events from './events.js';
import * as ledgerOperations from './operations.js';
import * as owner from './owner.js';
import * as ownerApprovals from './owner-approvals.js';
import * as payments from './payments.js';
import * as recipients from './recipients.js';
import * as simulate from './simulate.js';
import * as trustedDestinations from './trusted-destinations.js';
import * as withdrawals from './withdrawals.js';
import * as webhooks from './webhooks.js';
import * as x402 from './x402.js';

export const handlers = {
  ...agent,
  ...account,
  ...activity,
  ...borrow,
  ...conversions,
  ...deposits,
  ...earn,
  ...events,
  ...ledgerOperations,
  ...payments,
  ...recipients,
  ...simulate,
  ...trustedDestinations,
  ...withdrawals,
  ...webhooks,
  ...x402,
  ...owner,
  ...ownerApprovals,
  ...admin,
} satisfies HandlerMap;
