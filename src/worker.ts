// Background loops (settlement, webhook deliveries, cleanup), run in-process by `npm start` or alone by scripts/worker.ts.
import type { Logger } from './lib/logger.js';

export interface WorkerLoop {
  name: string;
  /** Runs until `signal` aborts; must finish or release in-flight work before resolving. */
  run(signal: AbortSignal): Promise<void>;
}

export interface Worker {
  start(): void;
  stop(): Promise<void>;
}

export function createWorker(deps: { loops: WorkerLoop[]; log: Logger }): Worker {
  const controller = new AbortController();
  let running: Promise<unknown>[] = [];
  return {
    start() {
      running = deps.loops.map((loop) => loop.run(controller.signal).catch((err: unknown) => deps.log.error({ err, loop: loop.name }, 'worker loop crashed')));
      deps.log.info({ loops: deps.loops.map((l) => l.name) }, 'worker started');
    },
    async stop() {
      controller.abort();
      await Promise.all(running);
    },
  };
}

/** Sleeps `ms` or until `signal` aborts, whichever is first; never rejects. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** A polling loop: `tick` returns how much work it did; an idle tick waits `idleMs` (or a wake-up). */
export function createPollingLoop(name: string, tick: () => Promise<number>, opts: { idleMs: number; log: Logger; wake?: (cb: () => void) => void }): WorkerLoop {
  return {
    name,
    async run(signal) {
      let wakeUp: (() => void) | null = null;
      opts.wake?.(() => wakeUp?.());
      while (!signal.aborted) {
        let did = 0;
        try {
          did = await tick();
        } catch (err) {
          opts.log.error({ err, loop: name }, 'worker tick failed');
        }
        // Anything but a positive count is idle (a driver returning an object must not make this spin).
        if (!(did > 0) && !signal.aborted) {
          const idle = new AbortController();
          const onAbort = () => idle.abort();
          signal.addEventListener('abort', onAbort, { once: true });
          wakeUp = () => idle.abort();
          await sleep(opts.idleMs, idle.signal);
          wakeUp = null;
          signal.removeEventListener('abort', onAbort);
        }
      }
    },
  };
}
