#!/usr/bin/env bash
# A LangGraph.js agent loop whose checkpoints live in a served store, then its thread from the shell.
#
#   examples/typescript_agent.sh        (from the repository, after `make test`, which installs what it needs)
#
# Starts `mnemo serve` on a store in a temporary directory, runs clients/typescript/examples/agent.ts
# (three steps of a graph with MnemosyneSaver), then `mnemo log --thread` and `mnemo diff` of two steps.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
PATH="$here/.venv/bin:$PATH"
export MNEMO_DIR=$(mktemp -d)/store MNEMO_EMBEDDER=none
trap 'kill $server 2>/dev/null; rm -rf "$(dirname "$MNEMO_DIR")"' EXIT

mnemo init >/dev/null
export MNEMO_TOKEN=$(mnemo token create --role write --name agent 2>/dev/null)
mnemo serve --port 0 2> "$MNEMO_DIR.log" & server=$!
until grep -q '^serving' "$MNEMO_DIR.log"; do sleep 0.1; done
export MNEMO_URL=$(sed -n 's/^serving .* on \(http:[^ ]*\)\/v1 .*/\1/p' "$MNEMO_DIR.log")

(cd "$here/clients/typescript" && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run --silent example -- agent-1)

echo; echo '$ mnemo log --thread agent-1'
mnemo log --thread agent-1
step1=$(mnemo --json log --thread agent-1 | python3 -c 'import json,sys; print(next(c["id"] for c in map(json.loads, sys.stdin) if c["message"].startswith("checkpoint step 1 ")))')
step2=$(mnemo --json log --thread agent-1 | python3 -c 'import json,sys; print(next(c["id"] for c in map(json.loads, sys.stdin) if c["message"].startswith("checkpoint step 2 ")))')
echo; echo "\$ mnemo diff ${step1:0:12} ${step2:0:12}"
mnemo diff "$step1" "$step2"
