// Validate Kubernetes manifests the way an API server would, without one.
//
//   node validate.mjs [--rules] [--label NAME] FILE...    ('-' reads stdin)
//
// Three checks on every document:
//  1. schema: the Kubernetes API's OpenAPI schemas as compiled by the
//     kubernetes-models package (types, required fields, enums, formats);
//  2. fields: TypeScript's excess-property check against kubernetes-models'
//     interfaces, because those JSON schemas allow unknown fields while an API
//     server with strict field validation (kubectl's default) refuses them: a
//     misspelt `imagePullPolicyy` fails here;
//  3. with --rules, on a complete rendering (an overlay): what the API server
//     also refuses across fields (a selector that does not match its pod
//     template, a StatefulSet without its governing Service), Pod Security
//     "restricted" (and a read-only root) for every pod template, and what
//     ecoord needs from a job (run to completion as an Indexed Job whose pod
//     failure policy follows the agent's exit codes, stable node ids from the
//     completion index, the pod IP, a graceful leave within the grace period,
//     /dev/shm in memory, probes on the agent's endpoints, TLS and the job's
//     etcd user, every etcd member listed, a PodDisruptionBudget) and from
//     etcd (an initial member list that matches the replica count, TLS with
//     client certificates for clients and peers, a NetworkPolicy).
// Custom resources whose schemas kubernetes-models lacks (Kubeflow's
// PyTorchJob and PaddleJob, JobSet) are checked structurally: their known
// top-level fields, then every pod template they embed (a v1 PodTemplate)
// and, for JobSet, every Job template (a batch/v1 Job) through checks 1-3.
// Prints one line per document, then a summary; exit 1 if anything failed.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
let rules = false;
let label = null;
const files = [];
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === "--rules") rules = true;
  else if (a === "--label") label = process.argv[++i];
  else files.push(a);
}
if (!files.length) {
  console.error("usage: node validate.mjs [--rules] [--label NAME] FILE...");
  process.exit(2);
}

const docs = []; // {where, obj}
let failed = 0;
const fail = (where, msg) => {
  failed++;
  console.log(`FAIL ${where}: ${msg}`);
};

for (const f of files) {
  const name = f === "-" ? label || "stdin" : f;
  const text = readFileSync(f === "-" ? 0 : f, "utf8");
  const parsed = YAML.parseAllDocuments(text, { prettyErrors: true });
  parsed.forEach((d, i) => {
    const where = `${name}#${i}`;
    if (d.errors.length) return fail(where, `YAML: ${d.errors[0].message}`);
    const obj = d.toJS({ maxAliasCount: 100 });
    if (obj === null || obj === undefined) return; // an empty document
    if (typeof obj !== "object" || !obj.apiVersion || !obj.kind)
      return fail(where, "not a Kubernetes object (no apiVersion or kind)");
    docs.push({ where, obj });
  });
}


// Custom resources: a structural check of what ecoord's examples use, then
// their embedded templates go through the full checks as ordinary objects.
const CRDS = {
  "kubeflow.org/v1/PyTorchJob": { specs: "pytorchReplicaSpecs", spec: ["runPolicy", "pytorchReplicaSpecs", "elasticPolicy", "nprocPerNode"] },
  "kubeflow.org/v1/PaddleJob": { specs: "paddleReplicaSpecs", spec: ["runPolicy", "paddleReplicaSpecs", "elasticPolicy"] },
  "jobset.x-k8s.io/v1alpha2/JobSet": { spec: ["replicatedJobs", "failurePolicy", "successPolicy", "network", "startupPolicy", "suspend", "managedBy", "ttlSecondsAfterFinished", "coordinator"] },
};
const REPLICA_SPEC = ["replicas", "restartPolicy", "template"];
const RESTART = ["Always", "OnFailure", "Never", "ExitCode"];
for (const d of [...docs]) {
  const c = CRDS[`${d.obj.apiVersion}/${d.obj.kind}`];
  if (!c) continue;
  d.crd = true;
  const where = `${d.where} ${d.obj.kind}/${d.obj.metadata?.name ?? "?"}`;
  const bad = (m) => { d.bad = true; fail(where, `structure: ${m}`); };
  if (!d.obj.metadata?.name) bad("metadata.name is missing");
  const spec = d.obj.spec || {};
  for (const k of Object.keys(spec)) if (!c.spec.includes(k)) bad(`unknown field spec.${k}`);
  const add = (obj, path) => {
    const x = { where: `${d.where}:${path}`, obj, parent: d, path };
    docs.push(x);
    return x;
  };
  if (c.specs) {
    const rs = spec[c.specs];
    if (!rs || typeof rs !== "object" || !Object.keys(rs).length) bad(`spec.${c.specs} is missing`);
    for (const [role, r] of Object.entries(rs || {})) {
      if (!["Master", "Worker"].includes(role)) bad(`spec.${c.specs}.${role}: the roles are Master and Worker`);
      for (const k of Object.keys(r || {})) if (!REPLICA_SPEC.includes(k)) bad(`unknown field spec.${c.specs}.${role}.${k}`);
      if (!Number.isInteger(r?.replicas) || r.replicas < 1) bad(`spec.${c.specs}.${role}.replicas must be a positive integer`);
      if (r?.restartPolicy !== undefined && !RESTART.includes(r.restartPolicy))
        bad(`spec.${c.specs}.${role}.restartPolicy must be one of ${RESTART.join(", ")}`);
      if (!r?.template) { bad(`spec.${c.specs}.${role}.template is missing`); continue; }
      add({ apiVersion: "v1", kind: "PodTemplate", metadata: { name: `${d.obj.metadata?.name}-${role}`.toLowerCase(), labels: r.template.metadata?.labels }, template: r.template },
        `${c.specs}.${role}.template`).replica = r;
    }
  } else {
    const rj = spec.replicatedJobs;
    if (!Array.isArray(rj) || !rj.length) bad("spec.replicatedJobs is missing");
    for (const [i, j] of (rj || []).entries()) {
      for (const k of Object.keys(j || {})) if (!["name", "replicas", "template", "dependsOn"].includes(k)) bad(`unknown field spec.replicatedJobs[${i}].${k}`);
      if (!j?.name) bad(`spec.replicatedJobs[${i}].name is missing`);
      if (!j?.template?.spec) { bad(`spec.replicatedJobs[${i}].template.spec is missing`); continue; }
      add({ apiVersion: "batch/v1", kind: "Job", metadata: { name: `${d.obj.metadata?.name}-${j.name}`, labels: j.template.metadata?.labels }, spec: j.template.spec },
        `replicatedJobs[${i}].template`);
    }
  }
}

// apiVersion "apps/v1" + kind "StatefulSet" -> "kubernetes-models/apps/v1/StatefulSet"
const modelPath = (o) => `kubernetes-models/${o.apiVersion}/${o.kind}`;
const id = (o) => `${o.kind}/${o.metadata?.name ?? "?"}`;

// 1. schema
for (const d of docs) {
  if (d.crd) continue;
  let mod;
  try {
    mod = await import(modelPath(d.obj));
  } catch {
    d.bad = true;
    fail(d.where, `no schema for ${d.obj.apiVersion} ${d.obj.kind} (a typo in apiVersion or kind?)`);
    continue;
  }
  const Model = mod[d.obj.kind];
  try {
    new Model(d.obj).validate();
  } catch (e) {
    d.bad = true;
    const errs = e.errors || [];
    const msg = errs.length
      ? errs.slice(0, 5).map((x) => `${x.instancePath || "/"} ${x.message}`).join("; ")
      : e.message;
    fail(`${d.where} ${id(d.obj)}`, `schema: ${msg}`);
  }
}

// 2. fields: one generated TypeScript file, one line per document
const good = docs.filter((d) => !d.bad && !d.crd);
if (good.length) {
  const work = join(here, ".check");
  mkdirSync(work, { recursive: true });
  const src = join(work, "manifests.ts");
  const lines = ["// generated by validate.mjs: one line per manifest"];
  const lineOf = new Map();
  good.forEach((d, i) => {
    lines.push(`import type { I${d.obj.kind} as T${i} } from "${modelPath(d.obj)}";`);
  });
  good.forEach((d, i) => {
    lineOf.set(lines.length, d);
    lines.push(`export const m${i}: T${i} = ${JSON.stringify(d.obj)};`);
  });
  writeFileSync(src, lines.join("\n") + "\n");
  const program = ts.createProgram([src], {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
  });
  for (const diag of ts.getPreEmitDiagnostics(program)) {
    const msg = ts.flattenDiagnosticMessageText(diag.messageText, " ");
    if (!diag.file) {
      fail("typescript", msg);
      continue;
    }
    const { line } = diag.file.getLineAndCharacterOfPosition(diag.start);
    const d = lineOf.get(line);
    if (!d) {
      fail("typescript", msg);
      continue;
    }
    d.bad = true;
    fail(`${d.where} ${id(d.obj)}`, `fields: ${msg}`);
  }
}

// 3. rules across a complete rendering
if (rules) {
  const all = docs.map((d) => d.obj);
  const of = (kind) => docs.filter((d) => d.obj.kind === kind && !d.crd);
  const matches = (sel, labels) =>
    Object.entries(sel || {}).every(([k, v]) => (labels || {})[k] === v);
  const need = (d, cond, msg) => {
    if (!cond) {
      d.bad = true;
      fail(`${d.where} ${id(d.obj)}`, `rule: ${msg}`);
    }
  };
  // Every pod template in the rendering, with the object that carries it.
  const pods = [];
  for (const d of docs) {
    if (d.crd) continue;
    const k = d.obj.kind;
    if (k === "Pod") pods.push({ d, tpl: { metadata: d.obj.metadata, spec: d.obj.spec } });
    else if (k === "PodTemplate") pods.push({ d, tpl: d.obj.template });
    else if (["StatefulSet", "Deployment", "Job", "DaemonSet", "ReplicaSet"].includes(k))
      pods.push({ d, tpl: d.obj.spec?.template });
  }
  const templates = pods.map((p) => p.tpl);

  // Pod Security Standards, level "restricted" (and a read-only root).
  const VOLUMES = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];
  for (const { d, tpl } of pods) {
    const ps = tpl?.spec || {};
    const psc = ps.securityContext || {};
    need(d, !ps.hostNetwork && !ps.hostPID && !ps.hostIPC, "restricted: no hostNetwork, hostPID or hostIPC");
    for (const v of ps.volumes || []) {
      const type = Object.keys(v).find((x) => x !== "name");
      need(d, VOLUMES.includes(type), `restricted: volume ${v.name} of type ${type} is not allowed`);
    }
    for (const c of [...(ps.initContainers || []), ...(ps.containers || [])]) {
      const sc = c.securityContext || {};
      const seccomp = sc.seccompProfile?.type ?? psc.seccompProfile?.type;
      need(d, seccomp === "RuntimeDefault" || seccomp === "Localhost",
        `restricted: container ${c.name} needs seccompProfile RuntimeDefault (pod or container)`);
      need(d, (sc.runAsNonRoot ?? psc.runAsNonRoot) === true && (sc.runAsUser ?? psc.runAsUser) !== 0,
        `restricted: container ${c.name} must run as non-root (runAsNonRoot: true)`);
      need(d, sc.allowPrivilegeEscalation === false, `restricted: container ${c.name} needs allowPrivilegeEscalation: false`);
      need(d, !sc.privileged, `restricted: container ${c.name} must not be privileged`);
      need(d, (sc.capabilities?.drop || []).includes("ALL") &&
        (sc.capabilities?.add || []).every((x) => x === "NET_BIND_SERVICE"),
        `restricted: container ${c.name} must drop ALL capabilities (and add none but NET_BIND_SERVICE)`);
      need(d, sc.readOnlyRootFilesystem === true, `container ${c.name} needs readOnlyRootFilesystem: true (write to emptyDirs)`);
      need(d, !(c.ports || []).some((p) => p.hostPort), `restricted: container ${c.name} must not use hostPort`);
    }
  }

  const etcds = of("StatefulSet").filter((d) => d.obj.metadata?.labels?.["app.kubernetes.io/name"] === "ecoord-etcd");
  const etcdMembers = etcds.length ? etcds[0].obj.spec?.replicas ?? 1 : null;

  // What an agent's pod needs, whatever carries it.
  const agent = (d, tpl, nodeIdArgs) => {
    const pod = tpl?.spec || {};
    const c = (pod.containers || []).find((x) => (x.command || []).includes("launch"));
    need(d, c, "a container must run `ecoord launch`");
    if (!c) return null;
    const args = c.args || [];
    const envv = (n) => (c.env || []).find((e) => e.name === n);
    const envFrom = (n) => envv(n)?.valueFrom?.fieldRef?.fieldPath;
    need(d, nodeIdArgs(args, envFrom), "--node_id must be stable across the pod's replacements (see the rule's kind)");
    need(d, args.includes("--host=$(POD_IP)") && envFrom("POD_IP") === "status.podIP",
      "--host must be the pod IP from the downward API");
    const arg = (flag) => args.find((a) => a.startsWith(`--${flag}=`))?.split("=")[1];
    const grace = Number(arg("grace_period") ?? 5);
    need(d, (pod.terminationGracePeriodSeconds ?? 30) >= grace + 10,
      `terminationGracePeriodSeconds must leave 10 s after --grace_period=${grace} for the leave`);
    const shm = (c.volumeMounts || []).find((m) => m.mountPath === "/dev/shm");
    const vol = shm && (pod.volumes || []).find((v) => v.name === shm.name);
    need(d, vol?.emptyDir?.medium === "Memory", "/dev/shm must be a memory-backed emptyDir");
    const port = Number(arg("metrics_port") ?? 0);
    const named = (p) => (typeof p === "number" ? p : (c.ports || []).find((x) => x.name === p)?.containerPort);
    need(d, port > 0 && c.livenessProbe?.httpGet?.path === "/healthz" &&
      named(c.livenessProbe.httpGet.port) === port, "liveness must probe /healthz on --metrics_port");
    need(d, c.readinessProbe?.httpGet?.path === "/readyz" &&
      named(c.readinessProbe.httpGet.port) === port, "readiness must probe /readyz on --metrics_port");
    // etcd: every member, over TLS, as the job's own user.
    const server = envv("ECOORD_ELASTIC_SERVER")?.value || "";
    const eps = server.split(",").filter(Boolean);
    need(d, eps.length && eps.every((e) => e.startsWith("https://")), "ECOORD_ELASTIC_SERVER must name etcd over https://");
    if (etcdMembers !== null)
      need(d, eps.length === etcdMembers && eps.every((e, i) => e.startsWith(`https://ecoord-etcd-${i}.ecoord-etcd-peer`)),
        `ECOORD_ELASTIC_SERVER must list every one of the ${etcdMembers} etcd member(s), not one Service address, so the client fails over`);
    const secretDir = (c.volumeMounts || []).find((m) => m.mountPath === "/etc/ecoord/etcd");
    const secret = secretDir && (pod.volumes || []).find((v) => v.name === secretDir.name)?.secret;
    need(d, secret?.secretName?.startsWith("ecoord-etcd-client-"), "mount the job's Secret ecoord-etcd-client-JOB at /etc/ecoord/etcd");
    for (const [k, f] of [["ECOORD_ETCD_CACERT", "ca.crt"], ["ECOORD_ETCD_CERT", "tls.crt"], ["ECOORD_ETCD_KEY", "tls.key"], ["ECOORD_ETCD_PASSWORD_FILE", "password"]])
      need(d, envv(k)?.value === `/etc/ecoord/etcd/${f}`, `${k} must be /etc/ecoord/etcd/${f}`);
    const job = envv("ECOORD_JOB_ID")?.value;
    need(d, envv("ECOORD_ETCD_USER")?.value === `ecoord-job-${job}` && secret?.secretName === `ecoord-etcd-client-${job}`,
      "ECOORD_ETCD_USER must be ecoord-job-JOB and the Secret ecoord-etcd-client-JOB (deploy/k8s/secure/etcd-auth.sh)");
    return { c, args, arg };
  };
  const isJobPod = (tpl) => tpl?.metadata?.labels?.["app.kubernetes.io/name"] === "ecoord-job";
  const byIndex = (args, envFrom) =>
    args.includes("--node_id=$(ECOORD_JOB_ID)-$(NODE_INDEX)") &&
    envFrom("NODE_INDEX") === "metadata.annotations['batch.kubernetes.io/job-completion-index']";
  const byPodName = (args, envFrom) => args.includes("--node_id=$(POD_NAME)") && envFrom("POD_NAME") === "metadata.name";

  for (const d of of("Job")) {
    const s = d.obj.spec || {};
    if (!isJobPod(s.template)) continue;
    const pod = s.template?.spec || {};
    need(d, s.completionMode === "Indexed", "completionMode must be Indexed (the index is the node id)");
    need(d, s.completions === s.parallelism, "completions and parallelism must be equal (scale both: an elastic Indexed Job)");
    need(d, pod.restartPolicy === "Never", "restartPolicy must be Never (podFailurePolicy needs it)");
    const rules_ = s.podFailurePolicy?.rules || [];
    const onCode = (code) => rules_.find((r) => r.onExitCodes?.operator === "In" && (r.onExitCodes.values || []).includes(code) &&
      (!r.onExitCodes.containerName || r.onExitCodes.containerName === "agent"))?.action;
    need(d, onCode(1) === "FailJob", "podFailurePolicy: exit 1 (this node cannot go on) must be FailJob");
    need(d, onCode(101) === "Count" || onCode(101) === "Ignore", "podFailurePolicy: exit 101 (restart this pod) must be Count or Ignore");
    need(d, rules_.some((r) => r.action === "Ignore" && (r.onPodConditions || []).some((c) => c.type === "DisruptionTarget")),
      "podFailurePolicy: a DisruptionTarget (drain, preemption) must be Ignore");
    need(d, (s.podReplacementPolicy ?? "Failed") === "Failed", "podReplacementPolicy must be Failed (one pod per node id at a time)");
    const a = agent(d, s.template, byIndex);
    if (a) need(d, a.c.name === "agent", "the agent's container must be named agent (podFailurePolicy names it)");
  }
  for (const d of of("PodTemplate")) {
    if (!d.parent || !isJobPod(d.obj.template)) continue;
    const a = agent(d, d.obj.template, byPodName);
    const r = d.replica || {};
    if (a && r.restartPolicy === "ExitCode") {
      const code = Number(a.arg("fixed_failure_exit") ?? 101);
      need(d, code >= 128 && code <= 255,
        `restartPolicy ExitCode retries only exit codes 128-255: set --fixed_failure_exit in that range (it is ${code})`);
    } else {
      need(d, ["OnFailure", "Always"].includes(r.restartPolicy), "restartPolicy must be ExitCode (with --fixed_failure_exit) or OnFailure");
    }
  }
  for (const d of of("StatefulSet")) {
    const s = d.obj.spec || {};
    need(d, s.selector?.matchLabels && matches(s.selector.matchLabels, s.template?.metadata?.labels),
      "spec.selector must match spec.template.metadata.labels (the API server refuses it)");
    const svc = all.find((o) => o.kind === "Service" && o.metadata?.name === s.serviceName);
    need(d, svc && svc.spec?.clusterIP === "None",
      `serviceName ${s.serviceName} must name a headless Service in the same rendering`);
    need(d, !isJobPod(s.template), "a training job is an Indexed Job (base/job), not a StatefulSet: a StatefulSet restarts finished agents forever");
  }
  for (const d of etcds) {
    const s = d.obj.spec || {};
    const c = (s.template?.spec?.containers || [])[0] || {};
    const env = (n) => (c.env || []).find((e) => e.name === n)?.value || "";
    const cluster = env("ETCD_INITIAL_CLUSTER");
    need(d, cluster.split(",").filter(Boolean).length === (s.replicas ?? 1),
      "ETCD_INITIAL_CLUSTER must list exactly spec.replicas members");
    need(d, cluster.split(",").every((m) => m.includes("=https://")), "ETCD_INITIAL_CLUSTER must use https:// peer URLs");
    need(d, env("ETCD_LISTEN_CLIENT_URLS").startsWith("https://") && env("ETCD_CLIENT_CERT_AUTH") === "true" &&
      env("ETCD_CERT_FILE") && env("ETCD_KEY_FILE") && env("ETCD_TRUSTED_CA_FILE"),
      "etcd clients need TLS with client certificates (ETCD_LISTEN_CLIENT_URLS https, ETCD_CLIENT_CERT_AUTH, cert, key, CA)");
    need(d, env("ETCD_LISTEN_PEER_URLS").startsWith("https://") && env("ETCD_PEER_CLIENT_CERT_AUTH") === "true" &&
      env("ETCD_PEER_CERT_FILE") && env("ETCD_PEER_TRUSTED_CA_FILE"),
      "etcd peers need TLS both ways (ETCD_LISTEN_PEER_URLS https, ETCD_PEER_CLIENT_CERT_AUTH, cert, CA)");
    need(d, s.updateStrategy?.type === "OnDelete",
      "etcd must update OnDelete (a rolling restart could take a second member while one is down)");
    need(d, (c.livenessProbe?.httpGet?.path || "").startsWith("/health"),
      "etcd liveness must probe its /health endpoint");
    need(d, (c.readinessProbe?.httpGet?.path || "").startsWith("/health"),
      "etcd readiness must probe its /health endpoint");
    const np = of("NetworkPolicy").find((p) => matches(p.obj.spec?.podSelector?.matchLabels, s.template?.metadata?.labels));
    need(d, np, "needs a NetworkPolicy selecting its pods");
    if (np) {
      const client = (np.obj.spec.ingress || []).find((r) => (r.ports || []).some((p) => p.port === "client" || p.port === 2379));
      need(np, client && (client.from || []).length &&
        client.from.every((f) => f.podSelector && !f.namespaceSelector && !f.ipBlock) &&
        client.from.some((f) => matches(f.podSelector.matchLabels, { "app.kubernetes.io/name": "ecoord-job" })),
        "the client port must admit only pods of this namespace selected by label (the job's pods)");
      need(np, (np.obj.spec.ingress || []).every((r) => (r.ports || []).length),
        "every ingress rule must name its ports (a rule without ports opens them all)");
    }
  }
  for (const d of [...of("StatefulSet"), ...of("Job")]) {
    const s = d.obj.spec || {};
    if (!d.parent && (isJobPod(s.template) || etcds.includes(d))) {
      const pdb = of("PodDisruptionBudget").find((p) =>
        matches(p.obj.spec?.selector?.matchLabels, s.template?.metadata?.labels));
      need(d, pdb, "needs a PodDisruptionBudget selecting its pods");
    }
  }
  for (const d of of("Service")) {
    const sel = d.obj.spec?.selector;
    need(d, !sel || templates.some((t) => matches(sel, t?.metadata?.labels)),
      "selector matches no pod template in this rendering");
  }
  for (const d of of("PodDisruptionBudget")) {
    need(d, templates.some((t) => matches(d.obj.spec?.selector?.matchLabels, t?.metadata?.labels)),
      "selector matches no pod template in this rendering");
  }
}

for (const d of docs) if (!d.bad) console.log(`ok   ${d.where} ${id(d.obj)}`);
console.log(`${docs.length - docs.filter((d) => d.bad).length} of ${docs.length} manifests valid` +
  (label ? ` (${label})` : ""));
process.exit(failed ? 1 : 0);
