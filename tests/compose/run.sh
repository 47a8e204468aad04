#!/usr/bin/env bash
# The docker-compose deployment, run for real (issue 26; docs/deployment.md "Run for real").
#
#   bash tests/compose/run.sh          # from the repository root; as root (dockerd); ~10-20 min fresh
#
# 1. a container engine: ../shared/tools/container-engine.sh (dockerd, compose v2, local base images
#    by debootstrap; idempotent, seconds when done already); CONTAINER_ENGINE=skip uses the running one
# 2. base images: the local ones that script makes when they exist, else the official names
#    (PYTHON_IMAGE, REDIS_IMAGE, NGINX_IMAGE given in the environment win)
# 3. its own compose project (svmstream-ci) on free host ports, so a deployment of the same files
#    on this machine is not touched; everything it created (containers, volumes, network) is removed
#    at the end, passed or failed (trap)
# 4. tests/compose/check_deployment.py: the checks, bounded waits, figures in
#    benchmarks/results/compose.md; the container logs are printed when a check fails
set -euo pipefail
cd "$(dirname "$0")/../.."
T0=$(date +%s)
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3

if [ "${CONTAINER_ENGINE:-}" != skip ]; then
  ENGINE=${CONTAINER_ENGINE:-../shared/tools/container-engine.sh}
  echo "+ bash $ENGINE"
  bash "$ENGINE"
fi
echo "+ container engine ready after $(( $(date +%s) - T0 )) s"

local_or() { if docker image inspect "$1" >/dev/null 2>&1; then echo "$1"; else echo "$2"; fi; }
export PYTHON_IMAGE=${PYTHON_IMAGE:-$(local_or local/python:bookworm python:3.11-slim)}
export REDIS_IMAGE=${REDIS_IMAGE:-$(local_or local/redis:bookworm redis:7.2-alpine)}
export NGINX_IMAGE=${NGINX_IMAGE:-$(local_or local/nginx:sid nginx:1.27-alpine)}
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-svmstream-ci}
# the image of this project (another deployment or CI run on this machine builds its own tag)
export SVMSTREAM_IMAGE=${SVMSTREAM_IMAGE:-svmstream:$COMPOSE_PROJECT_NAME}
export API_TOKEN=${API_TOKEN:-ci-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')}
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export LEARNER_PORT=${LEARNER_PORT:-$(free_port)}
export PREDICT_PORT=${PREDICT_PORT:-$(free_port)}
export SVMSTREAM_DATA=${SVMSTREAM_DATA:-$(cd .. && pwd)/shared/data}
unset DASK_ADDRESS
echo "+ images: $PYTHON_IMAGE $REDIS_IMAGE $NGINX_IMAGE; learner :$LEARNER_PORT, balancer :$PREDICT_PORT; data $SVMSTREAM_DATA"

cleanup() {
  rc=$?
  if [ "$rc" != 0 ]; then
    echo "+ the compose check failed ($rc): the last container logs"
    docker compose --profile dask --profile producer logs --no-color --tail 60 2>&1 | tail -400 || true
  fi
  echo "+ docker compose down -v (project $COMPOSE_PROJECT_NAME)"
  timeout 180 docker compose --profile dask --profile producer down -v --remove-orphans --timeout 20 >/dev/null 2>&1 || true
  echo "+ compose step: $(( $(date +%s) - T0 )) s in all, exit $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# a previous run killed before its trap ran leaves its project behind: start clean
timeout 180 docker compose --profile dask --profile producer down -v --remove-orphans --timeout 20 >/dev/null 2>&1 || true
timeout 2400 "$PY" tests/compose/check_deployment.py
