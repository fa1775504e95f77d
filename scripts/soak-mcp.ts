// MCP sessions in the soak (issue 30, item 7): sessions live in Redis, so any API process serves any request of any
// session. Each MCP client here sends every request to the next API process in turn (round robin, no stickiness),
// keeps a GET /mcp stream open for its `payment.executed` notifications and, when the process holding the stream is
// killed, reconnects on the next one with Last-Event-ID. Counted: which processes served each session, requests that
// got no answer outside kills and outages, sessions lost, and whether every payment a session made reached its stream.
//
// The soak's Redis restarts empty after its outage (no persistence): the sessions it held end there, by design, and
// their clients start new ones (the MCP client's answer to 404). The event check therefore covers each client's last
// session, opened after the outage or never touched by it.
import { randomUUID } from 'node:crypto';

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'soak', version: '1.0.0' } } };
const EVENT = 'notifications/agent_api/event';
const TIMEOUT_MS = 15_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Incarnation {
  sessionId: string;
  openedAt: number;
  /** Payments this session accepted (operation ids). */
  paid: string[];
  /** Operation ids of the payment.executed notifications its stream delivered. */
  seen: Set<string>;
  lastEventId: string | undefined;
  /** API processes that answered a request of this session (POSTs and streams). */
  servedBy: Set<number>;
  /** Reconnections whose Last-Event-ID was answered by another process than the one that sent that event. */
  crossResumes: number;
  lostAt: number | null;
}

export interface McpAnswer {
  at: number;
  api: number;
  ms: number;
  status: number | null;
  error: string | null;
  kind: 'initialize' | 'subscribe' | 'read' | 'pay';
  /** The refusal's message, for answers of 400 and above. */
  detail?: string;
}

export interface McpSoakDeps {
  apiUrl: (api: number) => string;
  up: (api: number) => boolean;
  elapsed: () => number;
  log: (msg: string) => void;
}

export function createMcpSoak(deps: McpSoakDeps, clients: Array<{ agentId: string; token: string }>) {
  const answers: McpAnswer[] = [];
  let rr = 0;
  let stopped = false;
  const next = (): number => {
    for (let k = 0; k < 3; k++) {
      const api = rr++ % 3;
      if (deps.up(api)) return api;
    }
    return rr++ % 3;
  };
  const state = clients.map((c) => ({ ...c, sessions: [] as Incarnation[], streamApi: -1, lastEventApi: -1 }));
  type Client = (typeof state)[number];
  const current = (c: Client) => c.sessions[c.sessions.length - 1];

  async function post(c: Client, kind: McpAnswer['kind'], body: unknown, api = next()): Promise<{ status: number | null; body: unknown; sessionId: string | null; retryAfter: string | null }> {
    const t0 = performance.now();
    const answer: McpAnswer = { at: deps.elapsed(), api, ms: 0, status: null, error: null, kind };
    const inc = current(c);
    try {
      const res = await fetch(`${deps.apiUrl(api)}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${c.token}`,
          ...(kind !== 'initialize' && inc ? { 'mcp-session-id': inc.sessionId } : {}),
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      const text = await res.text();
      answer.status = res.status;
      answer.ms = performance.now() - t0;
      answers.push(answer);
      if (res.status < 300 && inc && kind !== 'initialize') inc.servedBy.add(api);
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* an SSE answer or an empty 202 */
      }
      if (res.status >= 400) answer.detail = JSON.stringify((parsed as { error?: unknown } | null)?.error ?? parsed).slice(0, 160);
      return { status: res.status, body: parsed, sessionId: res.headers.get('mcp-session-id'), retryAfter: res.headers.get('retry-after') };
    } catch (err) {
      answer.error = (err as { cause?: { code?: string }; name?: string }).cause?.code ?? (err as Error).name ?? 'error';
      answer.ms = performance.now() - t0;
      answers.push(answer);
      return { status: null, body: null, sessionId: null, retryAfter: null };
    }
  }

  /** A request as a client sends it: a process that does not answer is skipped, a 503 waits its Retry-After (≤ 2 s). */
  async function send(c: Client, kind: McpAnswer['kind'], body: unknown) {
    let res = await post(c, kind, body);
    for (let attempt = 1; attempt < 4 && !stopped; attempt++) {
      if (res.status === null) await sleep(100);
      else if (res.status === 503) await sleep(Math.min(2000, Number(res.retryAfter ?? 1) * 1000));
      else break;
      res = await post(c, kind, body);
    }
    return res;
  }

  async function open(c: Client): Promise<boolean> {
    const init = await send(c, 'initialize', INITIALIZE);
    if (init.status !== 200 || !init.sessionId) return false;
    const inc: Incarnation = { sessionId: init.sessionId, openedAt: deps.elapsed(), paid: [], seen: new Set(), lastEventId: undefined, servedBy: new Set(), crossResumes: 0, lostAt: null };
    c.sessions.push(inc);
    c.lastEventApi = -1;
    await send(c, 'subscribe', { jsonrpc: '2.0', method: 'notifications/initialized' });
    const sub = await send(c, 'subscribe', { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'mcp_subscribe', arguments: { event_types: ['payment.executed'] } } });
    return sub.status === 200;
  }

  /** One tool call: a balance read or a payment. A 404 is the session gone (Redis restarted empty): a new one is opened. */
  async function step(c: Client): Promise<void> {
    const inc = current(c);
    if (!inc || inc.lostAt !== null) {
      await open(c);
      return;
    }
    const pay = Math.random() < 0.5;
    const args = pay ? { to: `0x${randomUUID().replace(/-/g, '').padEnd(40, '3')}`, asset: 'USDC', amount: '0.01', idempotency_key: randomUUID() } : {};
    const res = await send(c, pay ? 'pay' : 'read', { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: pay ? 'agent_payments_create' : 'agent_balances_list', arguments: args } });
    if (res.status === 404) {
      inc.lostAt = deps.elapsed();
      return;
    }
    const result = (res.body as { result?: { isError?: boolean; structuredContent?: { operation_id?: string } } } | null)?.result;
    if (pay && res.status === 200 && !result?.isError && typeof result?.structuredContent?.operation_id === 'string') inc.paid.push(result.structuredContent.operation_id);
  }

  /** The client's GET /mcp stream, reopened on the next process (with Last-Event-ID) whenever it ends. */
  async function stream(c: Client): Promise<void> {
    while (!stopped) {
      const inc = current(c);
      if (!inc || inc.lostAt !== null) {
        await sleep(200);
        continue;
      }
      const api = next();
      const resumeFrom = inc.lastEventId;
      try {
        const res = await fetch(`${deps.apiUrl(api)}/mcp`, {
          headers: { authorization: `Bearer ${c.token}`, accept: 'text/event-stream', 'mcp-session-id': inc.sessionId, ...(resumeFrom ? { 'last-event-id': resumeFrom } : {}) },
        });
        if (res.status === 404) {
          inc.lostAt = deps.elapsed();
          continue;
        }
        if (res.status !== 200 || !res.body) {
          await res.body?.cancel().catch(() => undefined);
          await sleep(300);
          continue;
        }
        inc.servedBy.add(api);
        if (resumeFrom && c.lastEventApi !== -1 && c.lastEventApi !== api) inc.crossResumes++;
        c.streamApi = api;
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        while (!stopped) {
          const chunk = await reader.read();
          if (chunk.done) break;
          buffer += decoder.decode(chunk.value, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const id = /^id: ?(.*)$/m.exec(block)?.[1];
            const data = block
              .split('\n')
              .filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(5).trim())
              .join('\n');
            if (!data) continue;
            const message = JSON.parse(data) as { method?: string; params?: { type?: string; operation_id?: string } };
            if (id) {
              inc.lastEventId = id;
              c.lastEventApi = api;
            }
            if (message.method === EVENT && message.params?.type === 'payment.executed' && message.params.operation_id) inc.seen.add(message.params.operation_id);
          }
        }
        await reader.cancel().catch(() => undefined);
      } catch {
        /* the process went away mid-stream: reconnect on the next one */
      }
      await sleep(100);
    }
  }

  const streams: Array<Promise<void>> = [];
  return {
    answers,
    /** Opens a session per client (each on the next process) and its stream. */
    async start(): Promise<void> {
      for (const c of state) await open(c);
      for (const c of state) streams.push(stream(c));
    },
    /** `runners` loops of tool calls until `until` (ms since epoch). */
    async load(until: number, runners: number): Promise<void> {
      await Promise.all(
        Array.from({ length: runners }, async (_, r) => {
          for (let i = r; Date.now() < until; i += runners) await step(state[i % state.length]!);
        }),
      );
    },
    /**
     * Waits (at most `ms`) until every payment of each client's last session that executed reached that session's
     * stream, then stops the streams. `executed` answers which of the ids executed.
     */
    async finish(executed: (ids: string[]) => Promise<Set<string>>, ms: number) {
      const deadline = Date.now() + ms;
      const last = state.map((c) => current(c)).filter((i): i is Incarnation => i !== undefined && i.lostAt === null);
      let missing: string[];
      let done: Set<string>;
      for (;;) {
        done = await executed(last.flatMap((i) => i.paid));
        missing = last.flatMap((i) => i.paid.filter((id) => done.has(id) && !i.seen.has(id)));
        if (missing.length === 0 || Date.now() > deadline) break;
        await sleep(500);
      }
      stopped = true;
      const all = state.flatMap((c) => c.sessions);
      return {
        clients: state.length,
        sessions: all.length,
        lostSessions: all.filter((i) => i.lostAt !== null).map((i) => i.lostAt!),
        lastSessions: last.length,
        paidInLast: last.reduce((n, i) => n + i.paid.length, 0),
        executedInLast: last.reduce((n, i) => n + i.paid.filter((id) => done.has(id)).length, 0),
        missing,
        servedByAllThree: all.filter((i) => i.servedBy.size === 3).length,
        servedByOne: all.filter((i) => i.servedBy.size <= 1).length,
        crossResumes: all.reduce((n, i) => n + i.crossResumes, 0),
      };
    },
  };
}
