// Tag events: the agent's events, newest first, and one event.
import type { Handler, Schema } from '../http/types.js';

type Event = Schema<'EventResponse'>['event'];

/**
 * An envelope as the outbox stored it. Services append only the document's event types; the
 * repository keeps `type` a string because appendEvent's callers pass it as one.
 */
const asEvent = (envelope: { type: string }): Event => envelope as Event;

export const listEvents: Handler<'listEvents'> = async (req, ctx) => {
  const page = await ctx.services.events.list(ctx.db, ctx.principal.agentId, req.query);
  return { status: 200, body: { ...page, items: page.items.map(asEvent) } };
};

export const getEvent: Handler<'getEvent'> = async (req, ctx) => ({ status: 200, body: { ok: true, event: asEvent(await ctx.services.events.get(ctx.db, ctx.principal.agentId, req.params.id)) } });
