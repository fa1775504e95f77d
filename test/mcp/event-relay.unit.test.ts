// The MCP event relay's cursor (late commits, no duplicates, credential pauses) and the session event store's replay, without a database.
import { expect } from 'chai';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Db } from '../../src/db/knex.js';
import { createLogger } from '../../src/lib/logger.js';
import { createEventRelay } from '../../src/mcp/event-relay.js';
import { createSessionEventStore } from '../../src/mcp/event-store.js';
import type { McpSession } from '../../src/mcp/sessions.js';
import type { EventService } from '../../src/services/event.service.js';

type Envelope = Awaited<ReturnType<EventService['get']>>;

describe('MCP event relay', () => {
  /** A visible-rows table the test fills in commit order (which need not be seq order). */
  const committed: { seq: number; type: string }[] = [];
  const events = {
    async feed(_db: Db, _agentId: string, afterSeq: string, limit: number) {
      return committed
        .filter((r) => r.seq > Number(afterSeq))
        .sort((a, b) => a.seq - b.seq)
        .slice(0, limit)
        .map((r) => ({ seq: String(r.seq), event: { id: `e${r.seq}`, type: r.type } as unknown as Envelope }));
    },
    async latestSeq() {
      return String(Math.max(0, ...committed.map((r) => r.seq)));
    },
  } as unknown as EventService;
  const session = { id: 's1', agentId: 'a1' } as McpSession;
  const sent: string[] = [];
  let allowed = true;
  const relay = createEventRelay({
    db: {} as Db,
    events,
    log: createLogger('silent'),
    pollMs: 1000,
    send: async (_s, event) => void sent.push((event as { id: string }).id),
    mayDeliver: async () => allowed,
  });
  after(() => relay.close());

  it('starts after the newest event, delivers a late commit below what it read, and never twice', async () => {
    committed.push({ seq: 1, type: 'payment.executed' });
    await relay.subscribe(session, ['payment.executed']);
    committed.push({ seq: 3, type: 'payment.executed' }, { seq: 4, type: 'webhook.test' });
    await relay.poll();
    expect(sent).to.deep.equal(['e3']);
    // seq 2 was allocated before 3 but its transaction commits now.
    committed.push({ seq: 2, type: 'payment.executed' });
    await relay.poll();
    await relay.poll();
    expect(sent).to.deep.equal(['e3', 'e2']);
  });

  it('holds events while the credential fails and sends them once it holds again', async () => {
    allowed = false;
    committed.push({ seq: 5, type: 'payment.executed' });
    await relay.poll();
    expect(sent).to.not.include('e5');
    allowed = true;
    await relay.poll();
    expect(sent.filter((id) => id === 'e5')).to.have.length(1);
  });

  it('sends nothing after unsubscribe', async () => {
    expect(await relay.unsubscribe('s1')).to.deep.equal([]);
    committed.push({ seq: 6, type: 'payment.executed' });
    await relay.poll();
    expect(sent).to.not.include('e6');
  });
});

describe('MCP session event store', () => {
  const message = (n: number) => ({ jsonrpc: '2.0', method: 'notifications/agent_api/event', params: { n } }) as JSONRPCMessage;

  it('replays the messages of the stream after the cursor, even when the cursor itself was dropped', async () => {
    const store = createSessionEventStore(3);
    const ids: string[] = [];
    for (let n = 1; n <= 5; n += 1) ids.push(await store.storeEvent('_GET_stream', message(n)));
    await store.storeEvent('other', message(99));
    expect(store.size()).to.equal(3);
    const replayed: number[] = [];
    const stream = await store.replayEventsAfter(ids[0]!, { send: async (_id, m) => void replayed.push((m as unknown as { params: { n: number } }).params.n) });
    expect(stream).to.equal('_GET_stream');
    // Kept: 4, 5 (and 99 of another stream); 2 and 3 fell out of the window.
    expect(replayed).to.deep.equal([4, 5]);
    expect(await store.getStreamIdForEventId!(ids[4]!)).to.equal('_GET_stream');
    expect(await store.getStreamIdForEventId!('_GET_stream~999')).to.equal(undefined);
    let refused = false;
    await store.replayEventsAfter('garbage', { send: async () => undefined }).catch(() => (refused = true));
    expect(refused).to.equal(true);
  });
});
