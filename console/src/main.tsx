// The owner console: sign in with an e-mailed code, then agents, keys, policy, limits, activity, trusted destinations,
// webhooks (deliveries, re-enable, recover), connected apps and the audit log. Each page lives in pages/.
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { consoleAuth, setCsrfToken, type ConsoleSession } from './api.js';
import { useRoute, type Route } from './route.js';
import { AgentPage, Agents } from './pages/agents.js';
import { Approvals } from './pages/approvals.js';
import { Apps } from './pages/apps.js';
import { Passkeys } from './pages/passkeys.js';
import { Audit } from './pages/audit.js';
import { AllDestinations } from './pages/destinations.js';
import { SignIn } from './pages/signin.js';
import { WebhookPage, Webhooks } from './pages/webhooks.js';
import './styles.css';

function App() {
  const route = useRoute();
  const [session, setSession] = useState<ConsoleSession | null | undefined>(undefined);
  const load = useCallback(() => {
    consoleAuth<ConsoleSession>('GET', 'session').then(
      (s) => {
        setCsrfToken(s.csrf_token);
        setSession(s);
      },
      () => setSession(null),
    );
  }, []);
  useEffect(load, [load]);
  if (session === undefined)
    return (
      <main>
        <p class="status" role="status">
          Loading…
        </p>
      </main>
    );
  if (session === null) return <SignIn onSignedIn={load} />;
  const nav: [string, string, Route['page'][]][] = [
    ['#/', 'Agents', ['agents', 'agent']],
    ['#/destinations', 'Destinations', ['destinations']],
    ['#/approvals', 'Approvals', ['approvals']],
    ['#/webhooks', 'Webhooks', ['webhooks', 'webhook']],
    ['#/apps', 'Connected apps', ['apps']],
    ['#/audit', 'Audit log', ['audit']],
    ['#/passkeys', 'Passkeys', ['passkeys']],
  ];
  return (
    <>
      <header>
        <nav aria-label="Console">
          <ul>
            {nav.map(([href, text, pages]) => (
              <li>
                <a href={href} aria-current={pages.includes(route.page) ? 'page' : undefined}>
                  {text}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>{session.email}</span>
          <button
            type="button"
            onClick={async () => {
              await consoleAuth('POST', 'logout');
              setSession(null);
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main>
        {route.page === 'agents' && <Agents />}
        {route.page === 'agent' && <AgentPage id={route.id} />}
        {route.page === 'destinations' && <AllDestinations />}
        {route.page === 'webhooks' && <Webhooks />}
        {route.page === 'webhook' && <WebhookPage id={route.id} />}
        {route.page === 'apps' && <Apps />}
        {route.page === 'audit' && <Audit />}
        {route.page === 'approvals' && <Approvals />}
        {route.page === 'passkeys' && <Passkeys />}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
