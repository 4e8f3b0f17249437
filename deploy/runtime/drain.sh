#!/bin/sh
# The runtime pod's preStop hook (deploy/k8s/base/runtime-pattern.yaml): starts the drain and
# waits for it. It sends SIGTERM to the container's init (PID 1, tini, which passes it to the
# runtime): a hosted runtime then heartbeats `draining` (the coordinator places nothing new on
# it), lets its open session run to its end or --drain-seconds, and exits. This hook returns when
# it has, so the kubelet's own SIGTERM, sent after the hook, never reaches a runtime still
# serving (a second signal would close it at once). terminationGracePeriodSeconds bounds it all.
#
#   ARCLIGHT_DRAIN_PID   the process to signal (default 1; tests point it elsewhere)
set -u
pid="${ARCLIGHT_DRAIN_PID:-1}"
kill -TERM "$pid" 2>/dev/null || exit 0 # already gone: nothing to drain
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
done
