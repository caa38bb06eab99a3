#!/bin/sh
# Start a single-member etcd on a free loopback port with its own data dir,
# for local jobs and the demo.  Prints "ENDPOINT PID DIR" on stdout once etcd
# serves clients; stop it with `kill PID` and remove DIR.
#   deploy/local/etcd.sh [DIR]
set -eu
ETCD=${ETCD:-etcd}
command -v "$ETCD" >/dev/null 2>&1 || { echo "etcd.sh: no etcd binary: apt-get install etcd-server" >&2; exit 1; }
DIR=${1:-$(mktemp -d /tmp/ecoord-local-etcd-XXXXXX)}
mkdir -p "$DIR"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port); peer=$(free_port)
"$ETCD" --name local --data-dir "$DIR/data" \
    --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "local=http://127.0.0.1:$peer" --heartbeat-interval=50 --election-timeout=250 \
    --logger=zap --log-outputs=stderr > "$DIR/etcd.log" 2>&1 &
pid=$!
deadline=$(( $(date +%s) + 15 ))
until grep -q "serving client traffic" "$DIR/etcd.log" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || [ "$(date +%s)" -gt "$deadline" ]; then
        echo "etcd.sh: etcd did not start; see $DIR/etcd.log" >&2
        kill "$pid" 2>/dev/null || true
        exit 1
    fi
    sleep 0.05
done
echo "127.0.0.1:$port $pid $DIR"
