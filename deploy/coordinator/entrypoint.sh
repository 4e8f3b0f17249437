#!/bin/sh
# The coordinator container's entrypoint: environment variables → `arclight coordinator` flags,
# then `exec` so Node is the process the container's init (tini) signals (SIGTERM → it stops
# serving and closes the database). Arguments given to the container are appended, so any flag
# the CLI has (see `arclight coordinator --help`) can be passed that way too; `admin …` runs an
# admin verb instead of the server (`docker run … arclight-coordinator admin add-model pattern
# --rate 5`), on the same DATABASE_URL.
#
#   DATABASE_URL              required: postgres://user:password@host:5432/db (replicas share it;
#                             a SQLite file path serves one pod only). The CLI reads it from the
#                             environment itself, so the password never appears on a command line.
#   ARCLIGHT_RUNTIME_SECRET   required for the server: the secret runtimes register with (read by
#                             the coordinator from the environment; never put on the command line)
#   ARCLIGHT_SIGNING_KEY_SECRET or ARCLIGHT_SIGNING_KEY_SECRET_FILE
#                             required for the server on PostgreSQL: the secret (or a file holding
#                             it, e.g. a mounted Kubernetes Secret) that encrypts the private signing
#                             keys in the database. Read by the CLI from the environment (the admin
#                             verbs too), never put on the command line
#   ARCLIGHT_SIGNING_KEY_REFRESH_MS
#                             --signing-key-refresh-ms (how soon a signing-key rotation or retirement
#                             reaches every replica; default 5000)
#   ARCLIGHT_PORT             --port (default 8090)
#   ARCLIGHT_HOST             --host (default 0.0.0.0: reachable from outside the container)
#   ARCLIGHT_WORKERS          --workers (processes sharing the port; default 1 — scale with replicas)
#   ARCLIGHT_RECONNECT_WINDOW --reconnect-window (seconds, 1–3600; default 30)
#   ARCLIGHT_METER_FLUSH_MS   --meter-flush-ms (housekeeping and billing interval; default 5000)
#   ARCLIGHT_HEARTBEAT_MS     --heartbeat-ms (how often runtimes heartbeat; default 5000)
#   ARCLIGHT_PUBLIC_URL       --public-url: the origin clients reach the coordinator at behind a
#                             load balancer or ingress (https://api.example.com); presigned clip
#                             URLs point there. An origin only: runtimes ignore one with a path,
#                             so it is refused here. Default: the address it listens on
#   ARCLIGHT_SIGNUP_CREDITS   promotional credits each new account receives (default 100000; 0 =
#                             none). Read by the CLI from the environment, not passed as a flag, so
#                             `admin create-account` grants the same as the server does
#   ARCLIGHT_HOME             where Arclight is installed (default /app)
set -eu

fail() {
  echo "arclight-coordinator: $*" >&2
  exit 64
}

[ -n "${DATABASE_URL:-}" ] || fail "DATABASE_URL is not set: set it to the PostgreSQL URL the replicas share, e.g. postgres://arclight:…@postgres:5432/arclight"
cli="${ARCLIGHT_HOME:-/app}/bin/arclight.js"

# `admin <verb> …`: the container's arguments are the whole command.
if [ "${1:-}" = admin ]; then
  exec node "$cli" "$@"
fi

[ -n "${ARCLIGHT_RUNTIME_SECRET:-}" ] || fail "ARCLIGHT_RUNTIME_SECRET is not set: runtimes could not register (set the same secret on the coordinator and every runtime)"
case "$DATABASE_URL" in
  postgres://* | postgresql://*)
    [ -n "${ARCLIGHT_SIGNING_KEY_SECRET:-}${ARCLIGHT_SIGNING_KEY_SECRET_FILE:-}" ] ||
      fail "ARCLIGHT_SIGNING_KEY_SECRET (or ARCLIGHT_SIGNING_KEY_SECRET_FILE) is not set: on PostgreSQL the coordinator keeps its private signing keys encrypted under this secret and does not start without it (generate one with: openssl rand -base64 32)"
    ;;
esac

# Build the command in the positional parameters (POSIX sh has no arrays): the container's own
# arguments ($1…$n) stay in front while the flags are appended, then are rotated to the end.
extra=$#
set -- "$@" "$cli" coordinator --port "${ARCLIGHT_PORT:-8090}" --host "${ARCLIGHT_HOST:-0.0.0.0}"
[ -z "${ARCLIGHT_WORKERS:-}" ] || set -- "$@" --workers "$ARCLIGHT_WORKERS"
[ -z "${ARCLIGHT_RECONNECT_WINDOW:-}" ] || set -- "$@" --reconnect-window "$ARCLIGHT_RECONNECT_WINDOW"
[ -z "${ARCLIGHT_METER_FLUSH_MS:-}" ] || set -- "$@" --meter-flush-ms "$ARCLIGHT_METER_FLUSH_MS"
[ -z "${ARCLIGHT_HEARTBEAT_MS:-}" ] || set -- "$@" --heartbeat-ms "$ARCLIGHT_HEARTBEAT_MS"
[ -z "${ARCLIGHT_SIGNING_KEY_REFRESH_MS:-}" ] || set -- "$@" --signing-key-refresh-ms "$ARCLIGHT_SIGNING_KEY_REFRESH_MS"
if [ -n "${ARCLIGHT_PUBLIC_URL:-}" ]; then
  # scheme://host[:port], one trailing slash tolerated (the CLI drops it).
  authority="${ARCLIGHT_PUBLIC_URL#*://}"
  authority="${authority%/}"
  case "$ARCLIGHT_PUBLIC_URL" in
    http://* | https://*) ;;
    *) authority="" ;;
  esac
  case "$authority" in
    "" | *[/?#\ ]*) fail "ARCLIGHT_PUBLIC_URL must be an http(s) origin with no path, e.g. https://api.example.com (got \"$ARCLIGHT_PUBLIC_URL\")" ;;
  esac
  set -- "$@" --public-url "$ARCLIGHT_PUBLIC_URL"
fi
while [ "$extra" -gt 0 ]; do
  set -- "$@" "$1"
  shift
  extra=$((extra - 1))
done

exec node "$@"
