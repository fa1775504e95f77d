// One injectable clock: every time-based rule reads it, so tests can run hours in seconds.

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export interface FakeClock extends Clock {
  set(at: Date | string): void;
  advance(ms: number): void;
}

export function createFakeClock(start: Date | string = new Date()): FakeClock {
  let current = new Date(start).getTime();
  return {
    now: () => new Date(current),
    set: (at) => {
      current = new Date(at).getTime();
    },
    advance: (ms) => {
      current += ms;
    },
  };
}
