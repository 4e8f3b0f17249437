#!/bin/sh
# The runtime container's entrypoint: environment variables → `arclight serve` flags, then `exec`
# so Node is the process the container's init (tini) signals: SIGTERM reaches the runtime, which
# drains (hosted mode: no new sessions, the open one runs up to --drain-seconds), and a second
# signal closes it at once. Arguments given to the container are appended, so any flag the CLI
# has (see `arclight serve --help`) can be passed that way too.
#
#   ARCLIGHT_MODEL            required: the model module (a .ts/.js file or a folder with index.ts)
#   ARCLIGHT_PORT             --port (default 8080)
#   ARCLIGHT_HOST             --host (default 0.0.0.0: reachable from outside the container)
#   ARCLIGHT_COORDINATOR_URL  --coordinator: hosted mode; needs ARCLIGHT_RUNTIME_SECRET, which the
#                             runtime reads from the environment itself (never put on the command
#                             line, where `ps` would show it)
#   ARCLIGHT_RUNTIME_ID       --runtime-id (hosted mode; Kubernetes: the pod's name)
#   ARCLIGHT_ADVERTISE_URL    --advertise-url (hosted mode; where the coordinator reaches this runtime)
#   ARCLIGHT_DRAIN_SECONDS    --drain-seconds (hosted mode; default 300)
#   ARCLIGHT_GRACE_SECONDS    --grace
#   ARCLIGHT_ICE_HOSTS        --ice-host, once per address (comma- or space-separated)
#   ARCLIGHT_ICE_PORT_RANGE   --ice-port-range, e.g. 40000-40999
#   ARCLIGHT_PUBLIC_IP        --public-ip (the address clients reach this host at behind a 1:1 NAT)
#   ARCLIGHT_TURN_URLS        --turn-url, once per URL (comma- or space-separated); needs
#                             ARCLIGHT_TURN_SECRET, which the runtime reads from the environment
#   ARCLIGHT_TURN_TTL         --turn-ttl (seconds the TURN credentials stay valid)
#   ARCLIGHT_LATENCY          --latency (realtime | smooth)
#   ARCLIGHT_CODECS           --codecs (e.g. h265,h264,vp8: software H.265 to clients that offer it)
#   ARCLIGHT_PLAYGROUND       false → --no-playground
#   ARCLIGHT_RECORDING        false → --no-recording
#   ARCLIGHT_MODERATOR_URL    --moderator-url (its token: ARCLIGHT_MODERATOR_TOKEN, read by the runtime)
#   ARCLIGHT_UPLOAD_MAX_BYTES --upload-max-bytes (e.g. 50M)
#   ARCLIGHT_UPLOAD_MIME_TYPES  --upload-mime-type, once per type (comma- or space-separated)
#   ARCLIGHT_UPLOAD_MAX_FILES --upload-max-files (per session)
#   ARCLIGHT_UPLOAD_DIR       --upload-dir
#   ARCLIGHT_RECORDING_DIR, ARCLIGHT_RECORDING_TRACK, ARCLIGHT_RECORDING_SEGMENT_SECONDS,
#   ARCLIGHT_RECORDING_BITRATE, ARCLIGHT_MAX_CLIP_SECONDS
#                             --recording-dir, --recording-track, --recording-segment-seconds,
#                             --recording-bitrate, --max-clip-seconds (not with ARCLIGHT_RECORDING=false)
#   ARCLIGHT_HOME             where Arclight is installed (default /app)
set -eu

fail() {
  echo "arclight-runtime: $*" >&2
  exit 64
}

# true/false for an on/off variable; anything else is a mistake worth stopping for.
flag_value() {
  case "$2" in
    1 | true | TRUE | True | yes | on) echo true ;;
    0 | false | FALSE | False | no | off) echo false ;;
    *) fail "$1 must be true or false (got \"$2\")" ;;
  esac
}

[ -n "${ARCLIGHT_MODEL:-}" ] || fail "ARCLIGHT_MODEL is not set: set it to the model module to serve, e.g. ARCLIGHT_MODEL=/app/models/examples/pattern"
if [ -n "${ARCLIGHT_COORDINATOR_URL:-}" ] && [ -z "${ARCLIGHT_RUNTIME_SECRET:-}" ]; then
  fail "ARCLIGHT_COORDINATOR_URL is set but ARCLIGHT_RUNTIME_SECRET is not: hosted mode needs the deployment's runtime secret (the coordinator's ARCLIGHT_RUNTIME_SECRET)"
fi
if [ -n "${ARCLIGHT_TURN_URLS:-}" ] && [ -z "${ARCLIGHT_TURN_SECRET:-}" ]; then
  fail "ARCLIGHT_TURN_URLS is set but ARCLIGHT_TURN_SECRET is not: TURN needs the shared secret (coturn's static-auth-secret)"
fi
for hosted_only in ARCLIGHT_RUNTIME_ID ARCLIGHT_ADVERTISE_URL ARCLIGHT_DRAIN_SECONDS; do
  eval "value=\${$hosted_only:-}"
  if [ -n "$value" ] && [ -z "${ARCLIGHT_COORDINATOR_URL:-}" ]; then
    fail "$hosted_only is set but ARCLIGHT_COORDINATOR_URL is not: it only applies in hosted mode"
  fi
done
playground=$(flag_value ARCLIGHT_PLAYGROUND "${ARCLIGHT_PLAYGROUND:-true}")
recording=$(flag_value ARCLIGHT_RECORDING "${ARCLIGHT_RECORDING:-true}")
if [ "$recording" = false ]; then
  for recording_only in ARCLIGHT_RECORDING_DIR ARCLIGHT_RECORDING_TRACK ARCLIGHT_RECORDING_SEGMENT_SECONDS ARCLIGHT_RECORDING_BITRATE ARCLIGHT_MAX_CLIP_SECONDS; do
    eval "value=\${$recording_only:-}"
    [ -z "$value" ] || fail "$recording_only is set but ARCLIGHT_RECORDING is false: it only applies when sessions are recorded"
  done
fi

# Build the command in the positional parameters (POSIX sh has no arrays): the container's own
# arguments ($1…$n) stay in front while the flags are appended, then are rotated to the end.
extra=$#
set -- "$@" "${ARCLIGHT_HOME:-/app}/bin/arclight.js" serve "$ARCLIGHT_MODEL" \
  --port "${ARCLIGHT_PORT:-8080}" --host "${ARCLIGHT_HOST:-0.0.0.0}"
[ -z "${ARCLIGHT_COORDINATOR_URL:-}" ] || set -- "$@" --coordinator "$ARCLIGHT_COORDINATOR_URL"
[ -z "${ARCLIGHT_RUNTIME_ID:-}" ] || set -- "$@" --runtime-id "$ARCLIGHT_RUNTIME_ID"
[ -z "${ARCLIGHT_ADVERTISE_URL:-}" ] || set -- "$@" --advertise-url "$ARCLIGHT_ADVERTISE_URL"
[ -z "${ARCLIGHT_DRAIN_SECONDS:-}" ] || set -- "$@" --drain-seconds "$ARCLIGHT_DRAIN_SECONDS"
[ -z "${ARCLIGHT_GRACE_SECONDS:-}" ] || set -- "$@" --grace "$ARCLIGHT_GRACE_SECONDS"
[ -z "${ARCLIGHT_ICE_PORT_RANGE:-}" ] || set -- "$@" --ice-port-range "$ARCLIGHT_ICE_PORT_RANGE"
[ -z "${ARCLIGHT_PUBLIC_IP:-}" ] || set -- "$@" --public-ip "$ARCLIGHT_PUBLIC_IP"
[ -z "${ARCLIGHT_TURN_TTL:-}" ] || set -- "$@" --turn-ttl "$ARCLIGHT_TURN_TTL"
[ -z "${ARCLIGHT_LATENCY:-}" ] || set -- "$@" --latency "$ARCLIGHT_LATENCY"
[ -z "${ARCLIGHT_CODECS:-}" ] || set -- "$@" --codecs "$ARCLIGHT_CODECS"
[ -z "${ARCLIGHT_MODERATOR_URL:-}" ] || set -- "$@" --moderator-url "$ARCLIGHT_MODERATOR_URL"
[ -z "${ARCLIGHT_UPLOAD_MAX_BYTES:-}" ] || set -- "$@" --upload-max-bytes "$ARCLIGHT_UPLOAD_MAX_BYTES"
[ -z "${ARCLIGHT_UPLOAD_MAX_FILES:-}" ] || set -- "$@" --upload-max-files "$ARCLIGHT_UPLOAD_MAX_FILES"
[ -z "${ARCLIGHT_UPLOAD_DIR:-}" ] || set -- "$@" --upload-dir "$ARCLIGHT_UPLOAD_DIR"
[ -z "${ARCLIGHT_RECORDING_DIR:-}" ] || set -- "$@" --recording-dir "$ARCLIGHT_RECORDING_DIR"
[ -z "${ARCLIGHT_RECORDING_TRACK:-}" ] || set -- "$@" --recording-track "$ARCLIGHT_RECORDING_TRACK"
[ -z "${ARCLIGHT_RECORDING_SEGMENT_SECONDS:-}" ] || set -- "$@" --recording-segment-seconds "$ARCLIGHT_RECORDING_SEGMENT_SECONDS"
[ -z "${ARCLIGHT_RECORDING_BITRATE:-}" ] || set -- "$@" --recording-bitrate "$ARCLIGHT_RECORDING_BITRATE"
[ -z "${ARCLIGHT_MAX_CLIP_SECONDS:-}" ] || set -- "$@" --max-clip-seconds "$ARCLIGHT_MAX_CLIP_SECONDS"
[ "$playground" = true ] || set -- "$@" --no-playground
[ "$recording" = true ] || set -- "$@" --no-recording
set -f # the lists are split on commas and blanks, never globbed (a TURN URL has a '?')
for address in $(echo "${ARCLIGHT_ICE_HOSTS:-}" | tr ',' ' '); do
  set -- "$@" --ice-host "$address"
done
for url in $(echo "${ARCLIGHT_TURN_URLS:-}" | tr ',' ' '); do
  set -- "$@" --turn-url "$url"
done
for mime_type in $(echo "${ARCLIGHT_UPLOAD_MIME_TYPES:-}" | tr ',' ' '); do
  set -- "$@" --upload-mime-type "$mime_type"
done
set +f
while [ "$extra" -gt 0 ]; do
  set -- "$@" "$1"
  shift
  extra=$((extra - 1))
done

exec node "$@"
