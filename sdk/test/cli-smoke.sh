#!/usr/bin/env bash
# CLI smoke: the SDK's flow through the installed `agent-api` binary (test/sdk/sdk.test.ts runs it against the live
# server). Needs AGENT_API_BASE_URL, AGENT_API_AGENT_ID, AGENT_API_KEY, AGENT_API_BIN (the binary), PAY_TO (an address)
# and LIMITED_AGENT_ID / LIMITED_API_KEY (an agent allowed one read per short window).
set -euo pipefail

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cli() { "$AGENT_API_BIN" "$@"; }
fail() { echo "cli smoke: FAIL: $*" >&2; exit 1; }
# field PATH: a value from the JSON on stdin (dotted path, array indexes allowed; `length` of arrays).
field() { node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>{let v=JSON.parse(s);for(const k of process.argv[1].split("."))v=v==null?v:v[k];process.stdout.write(typeof v==="object"?JSON.stringify(v):String(v))})' "$1"; }
# expect_exit CODE CMD...: runs CMD with its output in $tmp/out and $tmp/err and checks its exit code.
expect_exit() {
  local want=$1 got=0
  shift
  "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
  [ "$got" = "$want" ] || fail "$* exited $got, want $want: $(cat "$tmp/err")"
}

echo "cli smoke: node $(node -v)"

# Who am I, and what do I hold.
[ "$(cli self get | field agent.id)" = "$AGENT_API_AGENT_ID" ] || fail "self get did not return the agent"
cli balances list --limit 100 >"$tmp/balances.json"
node -e 'const b=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).items.find((x)=>x.asset_symbol==="USDC"); if(!b||Number(b.available)<10) process.exit(1)' "$tmp/balances.json" || fail "no USDC balance"

# A payment with a given key, and its replay: one operation.
key="cli-smoke-$$-$RANDOM"
first=$(cli payments create --to "$PAY_TO" --asset USDC --amount 1.5 --idempotency-key "$key" | field operation_id)
again=$(cli payments create --to "$PAY_TO" --asset USDC --amount 1.5 --idempotency-key "$key" | field operation_id)
[ -n "$first" ] && [ "$first" = "$again" ] || fail "replay with the same key gave $again, not $first"
# Without --idempotency-key each call gets a key of its own: two operations.
a=$(cli payments create --to "$PAY_TO" --asset USDC --amount 0.5 | field operation_id)
b=$(cli payments create --to "$PAY_TO" --asset USDC --amount 0.5 | field operation_id)
[ "$a" != "$b" ] || fail "two calls without a key made one operation"

# --wait follows the operation to a terminal status; the body may come from a file.
printf '{"to":"%s","asset":"USDC","amount":"0.25","note":"from a file"}' "$PAY_TO" >"$tmp/body.json"
cli payments create --body "@$tmp/body.json" --wait --pretty >"$tmp/waited.json"
[ "$(field operation.status <"$tmp/waited.json")" = executed ] || fail "--wait did not end executed: $(cat "$tmp/waited.json")"
waited_id=$(field operation_id <"$tmp/waited.json")
[ "$(cli operations get "$waited_id" | field operation.id)" = "$waited_id" ] || fail "operations get"

# Every page of the list with --all.
count=$(cli operations list --type payment --limit 2 --all | field length)
[ "$count" -ge 4 ] || fail "operations list --all gave $count items"

# Errors: the code on stderr and the documented exit codes.
expect_exit 3 cli payments create --to "$PAY_TO" --asset USDC --amount 100000000
grep -q '^agent-api: insufficient_funds (HTTP 422)' "$tmp/err" || fail "no insufficient_funds on stderr: $(cat "$tmp/err")"
expect_exit 3 cli operations get 00000000-0000-4000-8000-000000000000
grep -q 'not_found' "$tmp/err" || fail "no not_found on stderr"
expect_exit 2 cli payments create --asset USDC --amount 1
grep -q -- '--to' "$tmp/err" || fail "the usage error does not name --to"
expect_exit 2 cli payments create --to "$PAY_TO" --asset USDC --amount 1 --no-such-flag x
expect_exit 2 cli payments nope
expect_exit 2 env AGENT_API_BASE_URL= "$AGENT_API_BIN" self get
expect_exit 4 env AGENT_API_BASE_URL=http://127.0.0.1:9 AGENT_API_TIMEOUT_MS=2000 "$AGENT_API_BIN" self get
grep -q '^agent-api: network_error' "$tmp/err" || fail "no network_error on stderr"

# A 429 is retried after its Retry-After: LIMITED_AGENT_ID may read once per window (the test sets that up).
AGENT_API_AGENT_ID=$LIMITED_AGENT_ID AGENT_API_KEY=$LIMITED_API_KEY cli self get >/dev/null
AGENT_API_AGENT_ID=$LIMITED_AGENT_ID AGENT_API_KEY=$LIMITED_API_KEY cli self get --verbose 2>"$tmp/retry.err" | field agent.id >"$tmp/limited.id"
[ "$(cat "$tmp/limited.id")" = "$LIMITED_AGENT_ID" ] || fail "the limited agent's second read did not succeed: $(cat "$tmp/retry.err")"
grep -q '^agent-api: retry 1 in [0-9]* ms after rate_limited (HTTP 429)' "$tmp/retry.err" || fail "no 429 retry reported: $(cat "$tmp/retry.err")"

# Help names every command and every flag of the document.
cli --help | grep -q 'payments create' || fail "--help does not list payments create"
cli payments create --help >"$tmp/help.txt"
for flag in --to --asset --amount --amount-usd --deliver-as --note --slippage-percent --prefer --idempotency-key --wait; do
  grep -q -- "$flag" "$tmp/help.txt" || fail "payments create --help does not describe $flag"
done

echo "cli smoke: ok"
