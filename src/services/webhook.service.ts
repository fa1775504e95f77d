// The webhook service the app and the agent tools use: endpoints (services/webhooks/endpoint.service.ts)
// and their deliveries (services/webhooks/delivery.service.ts) behind one interface.
import { createWebhookDeliveryService, type WebhookDeliveryService } from './webhooks/delivery.service.js';
import { createWebhookEndpointService, type WebhookEndpointService } from './webhooks/endpoint.service.js';
import type { WebhookServiceDeps } from './webhooks/shared.js';

export type { WebhookCaller, WebhookServiceDeps } from './webhooks/shared.js';

export interface WebhookService extends WebhookEndpointService, WebhookDeliveryService {}

export function createWebhookService(deps: WebhookServiceDeps): WebhookService {
  return { ...createWebhookEndpointService(deps), ...createWebhookDeliveryService(deps) };
}
