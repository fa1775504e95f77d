# Every target goes through npm so it runs on the pinned Node 24 (node_modules/.bin first on PATH).
.PHONY: install gen lint typecheck test check run worker migrate drift contract-lint bench-read bench-payments bench-webhooks

install:
	npm ci

gen:
	npm run --silent gen

lint:
	npm run --silent lint

contract-lint:
	npm run --silent lint:contract

typecheck:
	npm run --silent typecheck

# Fails when `make gen` changes a tracked file (generated/ must be committed as generated).
drift: gen
	@git diff --exit-code --stat -- generated/ || (echo "generated/ drifted from openapi/: run 'make gen' and commit" && exit 1)

test:
	npm test

check: lint contract-lint typecheck drift test

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
