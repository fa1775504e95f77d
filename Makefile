# Every target goes through npm so it runs on the pinned Node 24 (node_modules/.bin first on PATH).
.PHONY: format-check install gen generators contracts chain lint lint-layers typecheck test check run worker migrate drift contract-lint deploy-lint build soak bench-read bench-payments bench-webhooks bench-chain bench-footprint bench-metrics bench

install:
	npm ci

gen:
	npm run --silent gen

lint:
	npm run --silent lint

# The layer rules of docs/ARCHITECTURE.md (.dependency-cruiser.cjs): no import circles, no import that points up;
# no source file over 400 lines in src/, sdk/src and console/src, and no service file over 350 (scripts/check-sizes.ts).
lint-layers:
	npm run --silent lint:layers

contract-lint:
	npm run --silent lint:contract

# Clients from the served document with openapi-typescript + openapi-fetch, @hey-api/openapi-ts and orval at their
# defaults, each type-checked (scripts/check-generators.ts; also in `make test` as test/contract/generators.test.ts).
generators:
	npm run --silent check:generators

typecheck:
	npm run --silent typecheck

# Dockerfile, compose.yaml and deploy/k8s against deploy/schemas (no Docker engine or cluster needed).
deploy-lint:
	npm run --silent lint:deploy

build:
	npm run --silent build

# Scale-out run under faults (3 API processes, 2 workers, own Redis, Postgres through a cut-able proxy); not part of `make test`.
soak:
	npm run --silent soak

# Compiles contracts/*.sol with the npm solc package into contracts/artifacts/ (committed).
contracts:
	npm run --silent contracts

# A local development chain (Anvil) on 127.0.0.1:8545, chain id 31337.
chain:
	npm run chain

# Fails when `make gen` or `make contracts` changes a tracked file (their output must be committed as generated).
drift: gen contracts
	@git diff --exit-code --stat -- generated/ || (echo "generated/ drifted from openapi/: run 'make gen' and commit" && exit 1)
	@git diff --exit-code --stat -- contracts/artifacts/ || (echo "contracts/artifacts/ drifted from contracts/: run 'make contracts' and commit" && exit 1)

test:
	npm test

# The formatter (prettier, .prettierrc.json) over every hand-written source file; `npm run format` rewrites them.
format-check:
	npm run --silent format:check

check: lint format-check lint-layers contract-lint deploy-lint typecheck drift test

run:
	npm start

worker:
	npm run worker

migrate:
	npm run --silent migrate

bench-read:
	npm run --silent bench:read

bench-payments:
	npm run --silent bench:payments

bench-webhooks:
	npm run --silent bench:webhooks

bench-chain:
	npm run --silent bench:chain

# RSS of the compiled API process under load and time to the first /healthz 200, Postgres mode and embedded default.
bench-footprint:
	npm run --silent bench:footprint

# One /metrics scrape's database time with 1,000,000 operations seeded, beside the GROUP BY scrape it replaced (~60 s).
bench-metrics:
	npm run --silent bench:metrics

# read, payments, webhooks, footprint and metrics in turn, then one table of every figure beside its target (not chain: bench-chain);
# read, payments and webhooks also measure the tree issue 25 was filed against (950cddc) right before this one, and a last
# table sets the two trees side by side (npm run bench -- --baseline REV | none).
bench:
	npm run --silent bench
