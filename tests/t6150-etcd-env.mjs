// Print the environment of the rendered etcd StatefulSet's container as
// NAME=VALUE lines for member 0, as its kubelet would give it, with what
// only a cluster has mapped to this host (tests/t6150-kubelet.sh runs etcd
// with exactly this environment):
//   node t6150-etcd-env.mjs RENDERING CERTDIR DATADIR CLIENT PEER METRICS
// $(POD_NAME) is ecoord-etcd-0 and $(POD_NAMESPACE) ecoord; the Secret's
// mount /etc/etcd/tls is CERTDIR (make-certs.sh names the files as the
// Secret's keys), the data volume /var/lib/etcd is DATADIR; every URL's
// port 2379, 2380 and 2381 becomes 127.0.0.1 and the given port (cluster
// DNS and the pod's own network namespace).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { join } from "node:path";
const require = createRequire(join(process.env.EC_VALIDATE_DIR, "node_modules") + "/");
const YAML = require("yaml");
const [, , rendering, certs, data, client, peer, metrics] = process.argv;
const sts = YAML.parseAllDocuments(readFileSync(rendering, "utf8")).map((d) => d.toJS())
  .find((o) => o?.kind === "StatefulSet" && o.metadata?.labels?.["app.kubernetes.io/name"] === "ecoord-etcd");
const c = sts.spec.template.spec.containers.find((x) => x.name === "etcd");
const env = { POD_NAME: "ecoord-etcd-0", POD_NAMESPACE: "ecoord" };
const port = { 2379: client, 2380: peer, 2381: metrics };
for (const e of c.env) {
  if (e.valueFrom) continue; // the downward API: above
  let v = e.value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, n) => env[n] ?? all);
  v = v.replace(/(https?):\/\/[^,:/]+:(2379|2380|2381)/g, (all, scheme, p) => `${scheme}://127.0.0.1:${port[p]}`);
  v = v.replace(/^\/etc\/etcd\/tls\//, certs + "/").replace(/^\/var\/lib\/etcd\//, data + "/");
  env[e.name] = v;
  console.log(`${e.name}=${v}`);
}
