// The connect page /connect/<uid>: e-mail -> one-time code -> pick an agent and scopes -> approve or deny.
// Plain HTML forms (works without JavaScript); every POST carries a CSRF token bound to the interaction.
import { createHmac } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import type { InteractionDetails } from 'oidc-provider';
import { ALL_SCOPES } from '../auth/principal.js';
import { constantTimeEqual } from '../lib/crypto.js';
import { escapeHtml, page, securityHeaders } from './html.js';
import { isPlausibleEmail, LOGIN_CODE_MAX_ATTEMPTS, OAuthInputError } from './oauth.service.js';
import type { OAuthDeps, OAuthRuntime } from './types.js';

const SCOPE_LABELS: Record<string, string> = {
  'agent:read': 'Read balances, activity, operations and resource lists',
  'agent:simulate': 'Simulate requests without executing them',
  'agent:payments:write': 'Create payments and one-off payments',
  'agent:conversions:write': 'Execute conversions',
  'agent:withdrawals:write': 'Withdraw to a bank or a crypto destination',
  'agent:earn:write': 'Deposit, withdraw, move and claim rewards in earn products',
  'agent:borrow:write': 'Borrow, repay, deleverage and adjust collateral',
  'agent:trusted_destinations:write': 'Confirm, cancel and remove trusted destinations',
  'agent:webhooks:manage': 'Create, update, delete, rotate and test webhook endpoints',
};

interface View {
  uid: string;
  csrf: string;
  clientName: string;
  redirectHost: string;
  resource: string;
  scopes: string[];
}

export function createConnectRouter(deps: OAuthDeps & { runtime: OAuthRuntime }) {
  const { db, services, log, config } = deps;
  const router = express.Router();
  const csrfKey = createHmac('sha256', config.masterKey).update('agent-api:oauth:csrf').digest();
  const csrfFor = (uid: string) => createHmac('sha256', csrfKey).update(uid).digest('base64url');

  function send(res: Response, status: number, html: string): void {
    res.status(status).set(securityHeaders()).type('html').send(html);
  }

  function header(view: View): string {
    return `<h1>Connect ${escapeHtml(view.clientName)} to your agent</h1>
<dl><dt>Application</dt><dd>${escapeHtml(view.clientName)}</dd>
<dt>Returns to</dt><dd>${escapeHtml(view.redirectHost)}</dd>
<dt>Resource</dt><dd>${escapeHtml(view.resource)}</dd>
<dt>Asks for</dt><dd>${view.scopes.map((s) => `<code>${escapeHtml(s)}</code>`).join(', ')}</dd></dl>`;
  }

  const hidden = (view: View, action: string) => `<input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}"><input type="hidden" name="action" value="${action}">`;

  function emailStep(view: View, error?: string): string {
    return page(
      'Sign in',
      `${header(view)}${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/connect/${escapeHtml(view.uid)}">${hidden(view, 'email')}
<label for="email">Your e-mail address</label><input type="email" id="email" name="email" required autocomplete="email">
<button type="submit">Send me a code</button></form>${denyForm(view)}`,
    );
  }

  function codeStep(view: View, message: string, error?: string): string {
    return page(
      'Enter your code',
      `${header(view)}<p class="note">${escapeHtml(message)}</p>${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/connect/${escapeHtml(view.uid)}">${hidden(view, 'code')}
<label for="code">6-digit code</label><input type="text" id="code" name="code" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" required autocomplete="one-time-code">
<button type="submit">Continue</button></form>
<form method="post" action="/connect/${escapeHtml(view.uid)}">${hidden(view, 'restart')}<button type="submit">Use another e-mail or get a new code</button></form>${denyForm(view)}`,
    );
  }

  function consentStep(view: View, agents: { id: string; name: string; enabled: boolean }[], error?: string): string {
    const agentInputs = agents.length
      ? agents
          .map((a, i) => `<label><input type="radio" name="agent_id" value="${escapeHtml(a.id)}"${i === 0 ? ' checked' : ''} required> ${escapeHtml(a.name)}${a.enabled ? '' : ' (disabled)'}</label>`)
          .join('')
      : '<p class="error">You have no agents to connect.</p>';
    const scopeInputs = view.scopes
      .map((s) => `<label><input type="checkbox" name="scope" value="${escapeHtml(s)}" checked> <code>${escapeHtml(s)}</code>: ${escapeHtml(SCOPE_LABELS[s] ?? s)}</label>`)
      .join('');
    return page(
      'Approve access',
      `${header(view)}${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/connect/${escapeHtml(view.uid)}">${hidden(view, 'approve')}
<fieldset><legend>Agent</legend>${agentInputs}</fieldset>
<fieldset><legend>Permissions (untick any you do not want to give)</legend>${scopeInputs}</fieldset>
<button type="submit"${agents.length ? '' : ' disabled'}>Approve</button></form>${denyForm(view)}`,
    );
  }

  const denyForm = (view: View) => `<form method="post" action="/connect/${escapeHtml(view.uid)}">${hidden(view, 'deny')}<button type="submit">Deny</button></form>`;

  async function load(req: Request, res: Response): Promise<{ details: InteractionDetails; view: View } | null> {
    const provider = await deps.runtime.provider();
    let details: InteractionDetails;
    try {
      details = await provider.interactionDetails(req, res);
    } catch {
      send(res, 400, page('Sign-in expired', '<h1>This sign-in link has expired or was already used</h1><p>Start again from the application.</p>'));
      return null;
    }
    if (details.uid !== req.params.uid) {
      send(res, 400, page('Sign-in expired', '<h1>This sign-in link does not match your session</h1><p>Start again from the application.</p>'));
      return null;
    }
    const params = details.params;
    const client = await provider.Client.find(String(params.client_id));
    const requested = String(params.scope ?? '')
      .split(' ')
      .filter((s) => (ALL_SCOPES as readonly string[]).includes(s));
    const view: View = {
      uid: details.uid,
      csrf: csrfFor(details.uid),
      clientName: client?.clientName ?? String(params.client_id),
      redirectHost: URL.parse(String(params.redirect_uri))?.host ?? String(params.redirect_uri),
      resource: Array.isArray(params.resource) ? params.resource.join(' ') : String(params.resource),
      scopes: requested,
    };
    return { details, view };
  }

  async function finishWithError(req: Request, res: Response, error: string, description: string): Promise<void> {
    const provider = await deps.runtime.provider();
    await provider.interactionFinished(req, res, { error, error_description: description }, { mergeWithLastSubmission: false });
  }

  router.get('/:uid', async (req, res, next) => {
    try {
      const loaded = await load(req, res);
      if (!loaded) return;
      const { view, details } = loaded;
      if (Array.isArray(details.params.resource)) return finishWithError(req, res, 'invalid_target', 'exactly one resource must be requested');
      if (view.scopes.length === 0) return finishWithError(req, res, 'invalid_scope', 'request at least one agent:* scope');
      const ownerId = await services.oauth.signedInOwner(db, view.uid);
      if (ownerId) return send(res, 200, consentStep(view, await services.oauth.ownerAgents(db, ownerId)));
      send(res, 200, emailStep(view));
    } catch (err) {
      next(err);
    }
  });

  router.post('/:uid', express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 50 }), async (req, res, next) => {
    try {
      const loaded = await load(req, res);
      if (!loaded) return;
      const { view, details } = loaded;
      const body = (req.body ?? {}) as Record<string, string | string[] | undefined>;
      // A form value with U+0000 is never legitimate, and Postgres could not store or compare it.
      const field = (name: string): string => (typeof body[name] === 'string' && !(body[name] as string).includes('\u0000') ? (body[name] as string) : '');
      if (!constantTimeEqual(field('csrf'), view.csrf)) {
        return send(res, 403, page('Request refused', '<h1>This form has expired</h1><p>Reload the page and try again.</p>'));
      }

      switch (field('action')) {
        case 'email': {
          const email = field('email').trim();
          if (!isPlausibleEmail(email)) return send(res, 400, emailStep(view, 'Enter a valid e-mail address.'));
          const { throttled } = await services.oauth.requestLoginCode(db, { interactionUid: view.uid, email, clientName: view.clientName });
          if (throttled) return send(res, 429, emailStep(view, 'Too many codes were requested for this address. Try again in a few minutes.'));
          return send(res, 200, codeStep(view, `If ${email} belongs to an account, we have sent it a 6-digit code. It expires in 10 minutes.`));
        }
        case 'code': {
          const result = await services.oauth.verifyLoginCode(db, { interactionUid: view.uid, code: field('code') });
          if (result.ok) return send(res, 200, consentStep(view, await services.oauth.ownerAgents(db, result.ownerId)));
          const message = 'Enter the code we sent you.';
          switch (result.reason) {
            case 'invalid':
              return send(res, 400, codeStep(view, message, `That code is not valid. ${result.attemptsLeft} of ${LOGIN_CODE_MAX_ATTEMPTS} attempts left.`));
            case 'locked':
              return send(res, 429, codeStep(view, message, 'Too many wrong attempts. Request a new code.'));
            case 'expired':
              return send(res, 400, codeStep(view, message, 'This code has expired. Request a new code.'));
            default:
              return send(res, 400, emailStep(view, 'Request a code first.'));
          }
        }
        case 'restart':
          return send(res, 200, emailStep(view));
        case 'deny':
          return finishWithError(req, res, 'access_denied', 'the user denied the request');
        case 'approve':
          return approve(req, res, details, view, body);
        default:
          return send(res, 400, emailStep(view, 'Unknown action.'));
      }
    } catch (err) {
      next(err);
    }
  });

  async function approve(req: Request, res: Response, details: InteractionDetails, view: View, body: Record<string, string | string[] | undefined>): Promise<void> {
    const ownerId = await services.oauth.signedInOwner(db, view.uid);
    if (!ownerId) return send(res, 403, emailStep(view, 'Sign in first.'));
    const agents = await services.oauth.ownerAgents(db, ownerId);
    const agentId = typeof body.agent_id === 'string' ? body.agent_id : '';
    if (!agents.some((a) => a.id === agentId)) return send(res, 400, consentStep(view, agents, 'Pick one of your agents.'));
    const posted = new Set(([] as string[]).concat(body.scope ?? []));
    const approved = view.scopes.filter((s) => posted.has(s));
    if (approved.length === 0) return send(res, 400, consentStep(view, agents, 'Keep at least one permission, or deny the request.'));
    const rejected = view.scopes.filter((s) => !posted.has(s));

    const provider = await deps.runtime.provider();
    const resource = String(details.params.resource);
    const clientId = String(details.params.client_id);
    const grant = new provider.Grant({ accountId: agentId, clientId });
    grant.addResourceScope(resource, approved.join(' '));
    if (rejected.length > 0) grant.rejectResourceScope(resource, rejected.join(' '));
    if (
      String(details.params.scope ?? '')
        .split(' ')
        .includes('openid')
    )
      (grant as unknown as { addOIDCScope(s: string): void }).addOIDCScope('openid');
    const grantId = await grant.save();
    try {
      await services.oauth.bindGrant(db, { grantId, clientId, ownerId, agentId, resource, scopes: approved });
    } catch (err) {
      await grant.destroy();
      if (err instanceof OAuthInputError) return send(res, 400, consentStep(view, agents, err.message));
      throw err;
    }
    log.info({ grantId, clientId, agentId, scopes: approved }, 'oauth grant approved');
    await provider.interactionFinished(req, res, { login: { accountId: agentId }, consent: { grantId } }, { mergeWithLastSubmission: false });
  }

  return router;
}
