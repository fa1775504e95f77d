# syntax=docker/dockerfile:1
# Agent API image: compiled JavaScript on Node 24, non-root. One image, three commands:
#   API      node dist/src/server.js        (set RUN_WORKER=false when workers run apart)
#   worker   node dist/scripts/worker.js
#   migrate  node dist/scripts/migrate.js   (also: dist/scripts/rotate-master-key.js, dist/scripts/agentctl.js)
# Base images are pinned by version; pin them by digest as well in your registry mirror.

FROM node:24.21.0-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only; no install scripts (none of them needs one at run time).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM node:24.21.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY generated ./generated
COPY src ./src
COPY scripts ./scripts
COPY contracts ./contracts
COPY console ./console
# The same steps as `npm run build`, without the npm script's pinned-Node wrapper: the server, then the
# owner console (Vite) beside it, where dist/src/console/console.js looks for it.
RUN ./node_modules/.bin/tsc -p tsconfig.build.json \
 && mkdir -p dist/generated dist/console \
 && cp generated/openapi.json dist/generated/openapi.json \
 && ./node_modules/.bin/vite build --config console/vite.config.ts \
 && cp -r console/dist dist/console/dist

FROM node:24.21.0-bookworm-slim AS runtime
# MALLOC_ARENA_MAX=2 as in the start scripts (glibc malloc keeps fewer per-thread arenas; docs/ARCHITECTURE.md, Performance).
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    HOST=0.0.0.0 \
    PORT=3000 \
    METRICS_PORT=9464
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# The image's `node` user (uid 1000); numeric so Kubernetes can verify runAsNonRoot.
USER 1000:1000
EXPOSE 3000 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "--max-semi-space-size=8", "--heap-growing-percent=20", "dist/src/server.js"]
