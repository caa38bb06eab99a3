#!/bin/sh
# Turn on etcd's authentication and give one job its own user and role,
# limited to the job's keys.  Run again for every new job; running it twice
# changes nothing (the password is set to the file's again).
#
#   ETCDCTL="etcdctl ..." deploy/k8s/secure/etcd-auth.sh [-p PREFIX] JOB PASSWORD_FILE
#
# ETCDCTL is the etcdctl command line that reaches etcd as root (default
# `etcdctl`): with the certificates of make-certs.sh, root is the client
# certificate whose CN is root.  On the cluster of deploy/k8s, from a
# workstation (the etcd image has etcdctl but no shell):
#
#   ETCDCTL="kubectl exec -i -n ecoord ecoord-etcd-0 -- etcdctl --endpoints=https://127.0.0.1:2379 \
#       --cacert=/etc/etcd/tls/ca.crt --cert=/etc/etcd/root/tls.crt --key=/etc/etcd/root/tls.key" \
#       deploy/k8s/secure/etcd-auth.sh train certs/train.password
#
# What it does: user root without a password (certificate login only) and
# `auth enable`; role ecoord-job-JOB with readwrite on the key range
# PREFIX/JOB/ (everything ecoord keeps for the job: `--etcd_prefix` and
# `--job_id`, see docs/how-it-works.md); user ecoord-job-JOB with that role
# and the password in PASSWORD_FILE (the job's pods read it from
# ECOORD_ETCD_PASSWORD_FILE).  Nothing else is granted: a job cannot read or
# write another job's keys, nor anything outside its range.
set -eu
prefix=
while getopts p:h o; do
    case $o in
    p) prefix=$OPTARG ;;
    *) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# = 2 ] || { echo "usage: ETCDCTL=... $0 [-p PREFIX] JOB PASSWORD_FILE" >&2; exit 2; }
job=$1
pwfile=$2
case $job in *[!a-zA-Z0-9_.-]* | '') echo "$0: job id '$job': letters, digits, '.', '_', '-' only" >&2; exit 2 ;; esac
case $prefix in '' | /*) ;; *) echo "$0: -p wants a prefix starting with '/' (as --etcd_prefix)" >&2; exit 2 ;; esac
prefix=${prefix%/}
[ -s "$pwfile" ] || { echo "$0: $pwfile is missing or empty (make-certs.sh makes JOB.password)" >&2; exit 2; }
ctl=${ETCDCTL:-etcdctl}
user=ecoord-job-$job
role=ecoord-job-$job
range=$prefix/$job/

# shellcheck disable=SC2086 # ETCDCTL is a command line, split on purpose
run() { ETCDCTL_API=3 $ctl "$@"; }
quiet() { run "$@" >/dev/null 2>&1; }
# The password goes through stdin, never on a command line.
pw() { head -n 1 "$pwfile" | run "$@" --interactive=false >/dev/null; }

quiet user get root || run user add root --no-password >/dev/null
quiet role get root || run role add root >/dev/null
run user grant-role root root >/dev/null 2>&1 || true # "already granted" after the first run
quiet role get "$role" || run role add "$role" >/dev/null
run role grant-permission "$role" readwrite "$range" --prefix=true >/dev/null
if quiet user get "$user"; then
    pw user passwd "$user"
else
    pw user add "$user"
fi
run user grant-role "$user" "$role" >/dev/null
run auth enable >/dev/null
echo "etcd: authentication on; user $user has role $role: readwrite on $range"
