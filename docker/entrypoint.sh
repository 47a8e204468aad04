#!/bin/sh
# The image's entrypoint: runs its arguments (`svmstream serve`, `dask worker ...`).
# With REQUIRE_API_TOKEN=1 (docker-compose.yml sets it on the learner, the replicas and
# the producer) it refuses to start when SVMSTREAM_API_TOKEN is empty: compose itself no longer
# insists on API_TOKEN, so that `docker compose ps`, `logs`, `down` work without it (issue 26).
if [ "${REQUIRE_API_TOKEN:-0}" = 1 ] && [ -z "${SVMSTREAM_API_TOKEN:-}" ]; then
    echo "svmstream: SVMSTREAM_API_TOKEN is empty: set API_TOKEN for docker compose (docs/deployment.md)" >&2
    exit 64
fi
exec "$@"
