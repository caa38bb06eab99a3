# shellcheck shell=sh
# Sourced by the demo and the benchmarks (sh): SIGTERM and SIGINT end the
# script at once, its EXIT trap stopping what it started, except between
# hold and release, where it starts a process (etcd, an agent) and records
# it for that clean-up: a signal there is held, and acted on at release.
# Without the hold, a signal right after the start and before the record
# left that process running.
hold() { trap 'held=143' TERM; trap 'held=130' INT; }
release() { trap 'exit 143' TERM; trap 'exit 130' INT; [ -z "${held:-}" ] || exit "$held"; }
# etcd_held DIR: deploy/local/etcd.sh's etcd under DIR, held as above; sets
# EP (its endpoint) and EPID (its pid, for the clean-up).
# shellcheck disable=SC2046,SC2034 # etcd.sh prints "ENDPOINT PID"; EP and EPID are the caller's
etcd_held() { hold; set -- $(sh deploy/local/etcd.sh "$1"); EP=$1; EPID=$2; release; }
