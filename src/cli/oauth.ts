// agentctl: out-of-band OAuth clients, signing-key rotation, and the owner's connected apps (grants).
import { CliUsageError, onDatabase, requireFlag, requirePositional, seg, type CliArgs, type CliCommand } from './types.js';

const redirectUris = (args: CliArgs) =>
  requireFlag(args, 'redirect-uri')
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');

const usageErrors = async <T>(fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof (await onDatabase()).OAuthInputError) throw new CliUsageError(err.message);
    throw err;
  }
};

export const oauthCommands: CliCommand[] = [
  {
    name: 'oauth client add',
    usage: 'oauth client add --name N --redirect-uri U[,U2...]',
    run: (ctx, args) => usageErrors(async () => ({ ...(await ctx.services.oauth.addClient(ctx.db, { name: requireFlag(args, 'name'), redirectUris: redirectUris(args) })) })),
    http: (args) => ({ method: 'POST', path: '/v1/admin/oauth/clients', body: { name: requireFlag(args, 'name'), redirect_uris: redirectUris(args) } }),
  },
  {
    name: 'oauth rotate-keys',
    usage: 'oauth rotate-keys',
    run: async (ctx) => ({ ...(await ctx.services.oauth.rotateKeys(ctx.db)) }),
    http: () => ({ method: 'POST', path: '/v1/admin/oauth/rotate-keys' }),
  },
  {
    name: 'grants list',
    usage: 'grants list --owner OWNER_ID',
    run: async (ctx, args) => ({ grants: await ctx.services.oauth.listGrants(ctx.db, requireFlag(args, 'owner')) }),
    http: (args) => ({ method: 'GET', path: `/v1/owner/connected-apps?owner_id=${seg(requireFlag(args, 'owner'))}`, output: (body) => ({ grants: body.items }) }),
  },
  {
    name: 'grants revoke',
    usage: 'grants revoke GRANT_ID',
    run: (ctx, args) => usageErrors(async () => ({ ...(await ctx.services.oauth.revokeGrant(ctx.db, requirePositional(args, 0, 'GRANT_ID'))) })),
    http: (args) => ({ method: 'POST', path: `/v1/owner/connected-apps/${seg(requirePositional(args, 0, 'GRANT_ID'))}/revoke` }),
  },
];
