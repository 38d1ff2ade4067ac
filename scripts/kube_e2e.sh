#!/usr/bin/env bash
# The Kubernetes end-to-end check against a real cluster (not part of CI: CI has no cluster).
#
# Installs helm/studio into a scratch namespace, creates one execution through the HTTP API
# (replay provider: no model key needed), checks that it runs as a Job labelled
# app.kubernetes.io/name=studio-executor and ends `succeeded`, then cancels a second one and
# checks that its Job is deleted. Needs: KUBECONFIG, helm, kubectl, curl, python3, and
#   STUDIO_IMAGE          the studio image (repository:tag) the cluster can pull
#   STUDIO_E2E_DATABASE_URL, STUDIO_E2E_BROKER_URL   a PostgreSQL and a Redis the pods reach
#   STUDIO_E2E_REPO_URL   an https repository the executor can clone (push not required)
# Optional: STUDIO_E2E_GITHUB_TOKEN, STUDIO_E2E_NAMESPACE (default studio-e2e-<random>),
#   --keep (leave the namespace for inspection).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${KUBECONFIG:?set KUBECONFIG to the cluster to check against}"
: "${STUDIO_IMAGE:?set STUDIO_IMAGE (repository:tag)}"
: "${STUDIO_E2E_DATABASE_URL:?}" "${STUDIO_E2E_BROKER_URL:?}" "${STUDIO_E2E_REPO_URL:?}"
keep=0; [ "${1:-}" = "--keep" ] && keep=1
ns="${STUDIO_E2E_NAMESPACE:-studio-e2e-$RANDOM}"
key="$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
say() { echo "kube-e2e: $*" >&2; }
cleanup() { [ "$keep" = 1 ] && say "kept namespace $ns" || kubectl delete namespace "$ns" --wait=false >/dev/null; }
trap cleanup EXIT

say "namespace $ns"
kubectl create namespace "$ns" >/dev/null
kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted >/dev/null
secret_args=(--from-literal=STUDIO_DATABASE_URL="$STUDIO_E2E_DATABASE_URL"
             --from-literal=STUDIO_SECRET_KEY="$key"
             --from-literal=STUDIO_GITHUB_TOKEN="${STUDIO_E2E_GITHUB_TOKEN:-}")
kubectl -n "$ns" create secret generic studio-secrets "${secret_args[@]}" \
  --from-literal=STUDIO_BROKER_URL="$STUDIO_E2E_BROKER_URL" >/dev/null
kubectl -n "$ns" create secret generic studio-executor-secrets "${secret_args[@]}" >/dev/null

say "helm install (the migration hook runs first)"
helm install studio ./helm/studio -n "$ns" --wait --timeout 10m \
  --set image.repository="${STUDIO_IMAGE%:*}" --set image.tag="${STUDIO_IMAGE##*:}" \
  --set environment=development --set executor.sandbox=auto \
  --set executor.networkPolicy.enabled=false --set api.replicas=1 --set worker.replicas=1

token="$(kubectl -n "$ns" exec deploy/studio-api -- studio tokens create --name e2e \
  --scopes read,run,admin | tail -n 1)"
kubectl -n "$ns" port-forward svc/studio-api 18080:80 >/dev/null 2>&1 &
forward=$!
trap 'kill $forward 2>/dev/null; cleanup' EXIT
sleep 3
api() { curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"; }
script='{"turns":[{"tool_calls":[{"tool":"workspace.write_file","args":{"path":"E2E.md","content":"kube e2e\n"}}]},{"final":{"status":"success","summary":"kube e2e","changes":["E2E.md"],"issues":[],"questions":[]}}]}'
slow='{"turns":[{"tool_calls":[{"tool":"command.run","args":{"argv":["sleep","600"],"timeout_s":700}}]},{"final":{"status":"success","summary":"x","changes":[],"issues":[],"questions":[]}}]}'
create() { api -X POST http://127.0.0.1:18080/api/executions -d \
  "{\"repo_url\":\"$STUDIO_E2E_REPO_URL\",\"provider\":\"replay\",\"prompt\":\"e2e\",\"replay_script\":$1}" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
status() { api "http://127.0.0.1:18080/api/executions/$1" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])'; }
jobs_of() { kubectl -n "$ns" get jobs -l "studio.dev/execution-id=$1" -o name; }

id="$(create "$script")"; say "execution $id"
for _ in $(seq 120); do [ -n "$(jobs_of "$id")" ] && break; sleep 2; done
[ -n "$(jobs_of "$id")" ] || { say "FAIL: no Job for $id"; exit 1; }
for _ in $(seq 300); do s="$(status "$id")"; case "$s" in succeeded|failed|cancelled|stalled) break;; esac; sleep 2; done
[ "$s" = succeeded ] || { say "FAIL: execution ended $s"; kubectl -n "$ns" logs -l "studio.dev/execution-id=$id" || true; exit 1; }
say "execution $id succeeded in its Job"

id="$(create "$slow")"; say "execution $id (to cancel)"
for _ in $(seq 120); do [ "$(status "$id")" = running ] && break; sleep 2; done
uid="$(kubectl -n "$ns" get jobs -l "studio.dev/execution-id=$id" -o jsonpath='{.items[0].metadata.uid}')"
uids() { kubectl -n "$ns" get jobs -l "studio.dev/execution-id=$id" -o jsonpath='{.items[*].metadata.uid}'; }
api -X POST "http://127.0.0.1:18080/api/executions/$id/cancel" >/dev/null
# (the reaper may later start a new Job that records the cancellation: its uid differs)
for _ in $(seq 60); do case " $(uids) " in *" $uid "*) sleep 2;; *) break;; esac; done
case " $(uids) " in *" $uid "*) say "FAIL: the Job of $id was not deleted"; exit 1;; esac
say "cancel deleted the Job of $id; all checks passed"
