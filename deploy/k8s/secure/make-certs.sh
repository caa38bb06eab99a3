#!/bin/sh
# Make the certificates, keys and passwords ecoord's etcd and its jobs use,
# and the Kubernetes Secrets that carry them, with openssl (Debian's
# `openssl` package) and nothing else.
#
#   deploy/k8s/secure/make-certs.sh [-n NAMESPACE] [-m MEMBERS] [-d DAYS] [-p PREFIX] OUTDIR JOB...
#
# OUTDIR/ca.crt, ca.key     the CA (kept: a second run signs with it, so
#                           adding a job later does not replace etcd's certs)
# OUTDIR/server.crt, .key   etcd's serving and peer certificate: SANs for
#                           every member (ecoord-etcd-N.ecoord-etcd-peer, with
#                           .NAMESPACE.svc and .svc.cluster.local), the client
#                           Service, localhost and 127.0.0.1
# OUTDIR/root.crt, .key     client certificate with CN=root: etcd's
#                           --client-cert-auth takes the CN as the user, so
#                           this is the administrator's login (etcd-auth.sh)
# OUTDIR/JOB.crt, .key      a job's client certificate, CN=ecoord-job-JOB
# OUTDIR/JOB.password       that job's etcd password (random, 32 hex digits)
# OUTDIR/secrets.yaml       Secrets ecoord-etcd-tls (the members'),
#                           ecoord-etcd-root (the administrator's) and
#                           ecoord-etcd-client-JOB per job (what the job's pods
#                           mount at /etc/ecoord/etcd): `kubectl apply -n NAMESPACE -f`
#
# -n NAMESPACE  where etcd runs (default ecoord); -m MEMBERS  etcd members
# (default 3); -d DAYS  validity (default 365); -p PREFIX  --etcd_prefix of
# the jobs (recorded in secrets.yaml as the key ecoord's role covers).
# Existing keys and certificates are kept; delete OUTDIR's files to renew.
set -eu
ns=ecoord
members=3
days=365
prefix=
while getopts n:m:d:p:h o; do
    case $o in
    n) ns=$OPTARG ;;
    m) members=$OPTARG ;;
    d) days=$OPTARG ;;
    p) prefix=$OPTARG ;;
    *) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { echo "usage: $0 [-n NAMESPACE] [-m MEMBERS] [-d DAYS] [-p PREFIX] OUTDIR JOB..." >&2; exit 2; }
command -v openssl >/dev/null 2>&1 || { echo "$0: openssl is missing (apt-get install openssl)" >&2; exit 1; }
case $members in *[!0-9]* | '' | 0) echo "$0: -m wants a member count, not '$members'" >&2; exit 2 ;; esac
out=$1
shift
for job in "$@"; do
    case $job in
    *[!a-zA-Z0-9_.-]* | '') echo "$0: job id '$job': use letters, digits, '.', '_' and '-' only" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
umask 077
cd "$out"

if [ ! -f ca.key ]; then
    openssl req -x509 -newkey rsa:3072 -nodes -days "$days" -subj "/CN=ecoord-etcd-ca" \
        -keyout ca.key -out ca.crt 2>/dev/null
fi

# sign NAME CN EXTFILE: NAME.key, NAME.crt signed by the CA (kept if present)
sign() {
    [ -f "$1.crt" ] && [ -f "$1.key" ] && return 0
    openssl req -newkey rsa:3072 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
        -extfile "$3" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr"
}

sans="DNS:ecoord-etcd,DNS:ecoord-etcd.$ns,DNS:ecoord-etcd.$ns.svc,DNS:ecoord-etcd.$ns.svc.cluster.local,DNS:localhost,IP:127.0.0.1"
i=0
while [ "$i" -lt "$members" ]; do
    m=ecoord-etcd-$i.ecoord-etcd-peer
    sans="$sans,DNS:$m,DNS:$m.$ns,DNS:$m.$ns.svc,DNS:$m.$ns.svc.cluster.local"
    i=$((i + 1))
done
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' "$sans" >server.ext
printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' >client.ext
sign server ecoord-etcd server.ext
sign root root client.ext
for job in "$@"; do
    sign "$job" "ecoord-job-$job" client.ext
    [ -s "$job.password" ] || openssl rand -hex 16 >"$job.password"
done
rm -f server.ext client.ext ca.srl

b64() { base64 -w0 <"$1"; }
# secret NAME KEY=FILE...
secret() {
    name=$1
    shift
    printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  labels:\n    app.kubernetes.io/part-of: ecoord\ntype: Opaque\ndata:\n' "$name"
    for kv in "$@"; do
        printf '  %s: %s\n' "${kv%%=*}" "$(b64 "${kv#*=}")"
    done
}
{
    secret ecoord-etcd-tls ca.crt=ca.crt server.crt=server.crt server.key=server.key
    secret ecoord-etcd-root ca.crt=ca.crt tls.crt=root.crt tls.key=root.key
    for job in "$@"; do
        printf '%s/%s/\n' "$prefix" "$job" >"$job.keyprefix"
        secret "ecoord-etcd-client-$job" ca.crt=ca.crt tls.crt="$job.crt" tls.key="$job.key" \
            password="$job.password" keyprefix="$job.keyprefix"
    done
} >secrets.yaml
echo "made in $(pwd): CA, etcd server certificate for $members member(s) in namespace $ns, root, job(s): $*"
echo "next: kubectl apply -n $ns -f $(pwd)/secrets.yaml"
