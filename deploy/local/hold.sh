# Sourced by the demo and the benchmarks (sh): SIGTERM and SIGINT end the
# script at once, its EXIT trap stopping what it started, except between
# hold and release, where it starts a process (etcd, an agent) and records
# it for that clean-up: a signal there is held, and acted on at release.
# Without the hold, a signal right after the start and before the record
# left that process running.
hold() { trap 'held=143' TERM; trap 'held=130' INT; }
release() { trap 'exit 143' TERM; trap 'exit 130' INT; [ -z "${held:-}" ] || exit "$held"; }
