// Hash routes keep every page a plain GET of /console.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'agents' }
  | { page: 'agent'; id: string }
  | { page: 'destinations' }
  | { page: 'webhooks' }
  | { page: 'webhook'; id: string }
  | { page: 'apps' }
  | { page: 'audit' }
  | { page: 'approvals' }
  | { page: 'passkeys' };

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean);
  if (parts[0] === 'agents' && parts[1]) return { page: 'agent', id: parts[1] };
  if (parts[0] === 'webhooks' && parts[1]) return { page: 'webhook', id: parts[1] };
  if (parts[0] === 'destinations' || parts[0] === 'webhooks' || parts[0] === 'apps' || parts[0] === 'audit' || parts[0] === 'approvals' || parts[0] === 'passkeys') return { page: parts[0] } as Route;
  return { page: 'agents' };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}
