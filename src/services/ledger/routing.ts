// Routing: the routes a payment's `to` (recipient id, trusted destination id, address or name) can take, best first.
import type { Db } from '../../db/knex.js';
import { findPayeesByAddress, findRecipient, findRecipientsByName, type RecipientRow } from '../../db/repositories/recipient.repository.js';
import { findActiveRecurringByRecipient } from '../../db/repositories/recurring-payment.repository.js';
import { findTrustedDestination } from '../../db/repositories/trusted-destination.repository.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid } from '../../lib/ids.js';
import { isEvmAddress } from '../../lib/wallet-keys.js';

export type Route = 'recurring_payment' | 'one_off_payment' | 'trusted_destination' | 'direct';

export interface Target {
  route: Route;
  kind: 'recipient' | 'trusted_destination' | 'address';
  address: string;
  name: string | null;
  recipientId: string | null;
  destinationId: string | null;
  recurringPaymentId: string | null;
}

const ROUTE_ORDER: Route[] = ['recurring_payment', 'trusted_destination', 'one_off_payment', 'direct'];

async function recipientTarget(db: Db, r: Pick<RecipientRow, 'id' | 'agent_id' | 'kind' | 'name' | 'address'>): Promise<Target> {
  const recurring = r.kind === 'recurring' ? await findActiveRecurringByRecipient(db, r.agent_id, r.id) : undefined;
  return {
    route: r.kind === 'recurring' ? 'recurring_payment' : 'one_off_payment',
    kind: 'recipient',
    address: r.address,
    name: r.name,
    recipientId: r.id,
    destinationId: null,
    recurringPaymentId: recurring?.id ?? null,
  };
}

/** The route `prefer` names among `targets` (`auto`: the best one); `one_off_payment` also takes a direct address. */
export function pickRoute(targets: Target[], prefer: string | undefined): Target {
  const want = prefer ?? 'auto';
  const ordered = [...targets].sort((a, b) => ROUTE_ORDER.indexOf(a.route) - ROUTE_ORDER.indexOf(b.route));
  const found = want === 'auto' ? ordered[0] : ordered.find((t) => t.route === want || (want === 'one_off_payment' && t.route === 'direct'));
  if (!found) throw new ApiError('validation_failed', `\`to\` has no ${want} route`, { field: 'prefer', available: [...new Set(ordered.map((t) => t.route))] });
  return found;
}

/** Every route `to` can take (prefer=auto takes the first). */
export async function routeTargets(db: Db, agentId: string, to: string): Promise<Target[]> {
  const out: Target[] = [];
  if (isUuid(to)) {
    const recipient = await findRecipient(db, agentId, to);
    if (recipient) out.push(await recipientTarget(db, recipient));
    const dest = await findTrustedDestination(db, agentId, to);
    if (dest) {
      if (dest.status !== 'confirmed') throw new ApiError('invalid_state_transition', `trusted destination is ${dest.status}, not confirmed`, { field: 'to', status: dest.status });
      out.push({ route: 'trusted_destination', kind: 'trusted_destination', address: dest.address, name: dest.label, recipientId: null, destinationId: dest.id, recurringPaymentId: null });
    }
    if (out.length === 0) throw new ApiError('not_found', 'no recipient or trusted destination has this id', { field: 'to' });
    return out;
  }
  if (isEvmAddress(to)) return addressTargets(db, to, await findPayeesByAddress(db, agentId, to));
  const byName = await findRecipientsByName(db, agentId, to);
  if (byName.length === 0) throw new ApiError('not_found', 'no recipient has this id, address or name', { field: 'to' });
  for (const r of byName) out.push(await recipientTarget(db, r));
  return out;
}

/** The routes to an EVM address from its payees (findPayeesByAddress, or findPayeesAndPrice read with a price). */
export async function addressTargets(db: Db, to: string, payees: Awaited<ReturnType<typeof findPayeesByAddress>>): Promise<Target[]> {
  const out: Target[] = [];
  for (const r of payees.recipients) out.push(await recipientTarget(db, r));
  for (const d of payees.destinations)
    out.push({ route: 'trusted_destination', kind: 'trusted_destination', address: d.address, name: d.label, recipientId: null, destinationId: d.id, recurringPaymentId: null });
  out.push({ route: 'direct', kind: 'address', address: to, name: null, recipientId: null, destinationId: null, recurringPaymentId: null });
  return out;
}
