// One process at a time on an embedded data directory: PGlite is an in-process Postgres, so a second
// process opening the same files writes into a copy the first never reads (and loses it on restart).
import { linkSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holderPid: number,
    readonly lockFile: string,
  ) {
    super(
      `the embedded database in ${dataDir} is in use by process ${holderPid} (probably \`npm start\`); only one process may open it. ` +
        'Stop that process and run this again, or run the server and this command against Postgres (set DATABASE_URL for both). ' +
        `If no such process exists, remove ${lockFile}.`,
    );
    this.name = 'DataDirLockedError';
  }
}

export interface DataDirLock {
  release(): void;
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is just not ours to signal.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * Takes `<dataDir>/.lock` (created atomically, holding our pid). A lock whose pid is dead, or is our own pid
 * (a container restarted as pid 1 finds its predecessor's file), is stale and taken over; the stale file
 * is renamed aside before being checked, so two processes taking over at once cannot both win.
 */
export function acquireDataDirLock(dataDir: string): DataDirLock {
  const lockFile = join(resolve(dataDir), '.lock');
  for (let attempt = 0; attempt < 5; attempt++) {
    // Written aside, then linked into place: the lock appears with its pid in it, or not at all.
    const mine = `${lockFile}.${process.pid}`;
    writeFileSync(mine, `${process.pid}\n`, { mode: 0o600 });
    try {
      linkSync(mine, lockFile);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        process.off('exit', release);
        try {
          if (readFileSync(lockFile, 'utf8').trim() === String(process.pid)) unlinkSync(lockFile);
        } catch {
          // already gone
        }
      };
      process.on('exit', release);
      return { release };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      unlinkSync(mine);
    }
    const holder = readPid(lockFile);
    if (holder !== null && holder !== process.pid && isAlive(holder)) throw new DataDirLockedError(dataDir, holder, lockFile);
    // Stale: move it aside under a name only we use, and take over only if it is still the stale one.
    const aside = `${lockFile}.stale-${process.pid}`;
    try {
      renameSync(lockFile, aside);
    } catch {
      continue; // someone else moved it first; look again
    }
    const moved = readPid(aside);
    if (moved !== holder)
      renameSync(aside, lockFile); // a fresh lock slipped in between: put it back
    else unlinkSync(aside);
  }
  throw new Error(`could not take the lock ${lockFile}`);
}

function readPid(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}
