// Minimal typings for oidc-provider 9 (it ships none): only what src/oauth uses.
/* eslint-disable @typescript-eslint/no-explicit-any -- typings for an untyped, Koa-based library surface */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export type KoaContextWithOIDC = any;
  export type Configuration = Record<string, any>;

  export interface InteractionDetails {
    uid: string;
    prompt: { name: string; reasons: string[]; details: Record<string, any> };
    params: Record<string, any>;
    session?: { accountId?: string; uid?: string };
    grantId?: string;
    returnTo: string;
    lastSubmission?: Record<string, any>;
    exp: number;
  }

  export interface GrantInstance {
    jti: string;
    accountId: string;
    clientId: string;
    addResourceScope(resource: string, scope: string): void;
    rejectResourceScope(resource: string, scope: string): void;
    getResourceScopeFiltered(resource: string, filter: Set<string> | string[]): string;
    save(ttl?: number): Promise<string>;
    destroy(): Promise<void>;
  }

  export interface ClientInstance {
    clientId: string;
    clientName?: string;
    redirectUris: string[];
    grantTypeAllowed(type: string): boolean;
    metadata(): Record<string, any>;
  }

  export class Provider {
    constructor(issuer: string, configuration?: Configuration);
    issuer: string;
    proxy: boolean;
    Grant: { new (input: { accountId: string; clientId: string }): GrantInstance; find(id: string): Promise<GrantInstance | undefined> };
    Client: { find(id: string): Promise<ClientInstance | undefined> };
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    use(middleware: (ctx: KoaContextWithOIDC, next: () => Promise<void>) => Promise<void> | void): void;
    on(event: string, listener: (...args: any[]) => void): this;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
    interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, any>, options?: { mergeWithLastSubmission?: boolean }): Promise<void>;
    interactionResult(req: IncomingMessage, res: ServerResponse, result: Record<string, any>, options?: { mergeWithLastSubmission?: boolean }): Promise<string>;
  }
  export default Provider;

  export const errors: Record<string, new (description?: string, detail?: string) => Error & { error: string; error_description?: string; status: number }> & {
    InvalidGrant: new (description?: string) => Error;
    InvalidRequest: new (description?: string) => Error;
    InvalidTarget: new (description?: string) => Error;
    InvalidRedirectUri: new (description?: string) => Error;
    InvalidClientMetadata: new (description?: string) => Error;
    OIDCProviderError: new (status: number, message: string) => Error;
  };

  export namespace interactionPolicy {
    class Check {
      constructor(reason: string, description: string, check: (ctx: KoaContextWithOIDC) => unknown);
      constructor(reason: string, description: string, error: string, check: (ctx: KoaContextWithOIDC) => unknown);
      static REQUEST_PROMPT: boolean;
      static NO_NEED_TO_PROMPT: boolean;
    }
    interface Prompt {
      name: string;
      checks: { add(check: Check, index?: number): void; get(reason: string): Check | undefined };
    }
    function base(): Prompt[] & { get(name: string): Prompt | undefined };
  }
}
