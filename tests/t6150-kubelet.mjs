// The kubelet and the Job controller for deploy/k8s's job, played on this
// host (tests/t6150-kubelet.sh prepares everything and runs this):
//
//   node t6150-kubelet.mjs RENDERING SECRETS.yaml WORKDIR
//
// From the rendered overlay it takes the Job: its pod template's container
// command, args and env (downward API: the completion index and the pod IP;
// $(VAR) expanded as the kubelet does), its volumes (emptyDirs become
// directories, Secrets are written from SECRETS.yaml with their keys as file
// names), terminationGracePeriodSeconds, completions, backoffLimit and
// podFailurePolicy, and it runs each pod's command on this host against the
// TLS + authenticated etcd the script started.  Like the Job controller it
// replaces a failed pod (a new pod for the same index, once the old one has
// exited) only when the pod failure policy says Count or Ignore, fails the
// Job on FailJob, deletes the pods of removed indexes on scale-down (SIGTERM,
// SIGKILL after the grace period; not counted as failures) and calls the
// Job complete when every index has a pod that exited 0.
//
// What differs from a cluster, and why it does not change what is tested:
// every pod shares this host's network, so the agent's --metrics_port is
// moved to a free port per pod (a pod has its own network namespace) and
// the etcd member names resolve to 127.0.0.1 (cluster DNS); paths inside the
// image (ecoord, the example trainer, tini) map to the build tree, and tini
// is left out when /usr/bin/tini is missing (it only forwards signals).
// EC_KUBELET_MAP is a JSON object of those image paths -> host paths.
import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import http from "node:http";

const [, , renderFile, secretsFile, work] = process.argv;
const require = createRequire(join(process.env.EC_VALIDATE_DIR, "node_modules") + "/");
const YAML = require("yaml");
const mult = Number(process.env.EC_TEST_TIMEOUT_MULTIPLIER || 1);
const etcdEndpoint = process.env.EC_ETCD; // https://127.0.0.1:PORT
const imageMap = JSON.parse(process.env.EC_KUBELET_MAP || "{}");
const build = process.env.EC_BUILDDIR;

let nTests = 0;
let failed = 0;
const ok = (cond, name, diag) => {
  nTests++;
  console.log(`${cond ? "ok" : "not ok"} ${nTests} - ${name}`);
  if (!cond) {
    failed++;
    if (diag) console.log(String(diag).replace(/^/gm, "# "));
  }
  return cond;
};
const note = (s) => console.log(`# ${s}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Poll fn until it returns a truthy value or the deadline passes.
async function until(what, fn, ms) {
  const end = Date.now() + ms * mult;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(100);
  }
  note(`gave up waiting ${ms * mult} ms for ${what}`);
  return null;
}

const docs = YAML.parseAllDocuments(readFileSync(renderFile, "utf8")).map((d) => d.toJS());
const jobObj = docs.find((o) => o?.kind === "Job" && o.spec?.template?.metadata?.labels?.["app.kubernetes.io/name"] === "ecoord-job");
const secrets = Object.fromEntries(
  YAML.parseAllDocuments(readFileSync(secretsFile, "utf8")).map((d) => d.toJS()).filter((o) => o?.kind === "Secret")
    .map((o) => [o.metadata.name, o.data]));

const freePort = () => new Promise((res) => {
  const s = createServer();
  s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => res(p)); });
});

// ---------------------------------------------------------------- a pod
let podSeq = 0;
const allPods = [];
// Whatever happens to this script, no pod outlives it.
process.on("exit", () => { for (const p of allPods) if (p.exit === null) p.proc.kill("SIGKILL"); });
async function startPod(job, index, override = {}) {
  const tpl = job.spec.template.spec;
  const c = tpl.containers.find((x) => x.name === "agent");
  const name = `${job.metadata.name}-${index}-${(++podSeq).toString(36).padStart(5, "x")}`;
  const root = join(work, name);
  mkdirSync(root, { recursive: true });
  // Volumes: a directory each; Secrets written out with their mode.
  const mounts = [];
  for (const m of c.volumeMounts || []) {
    const v = tpl.volumes.find((x) => x.name === m.name);
    const dir = join(root, "volumes", v.name);
    mkdirSync(dir, { recursive: true });
    if (v.secret) {
      const data = secrets[v.secret.secretName];
      if (!data) throw new Error(`Secret ${v.secret.secretName} is not in ${secretsFile}: the pod could not start`);
      for (const [k, b64] of Object.entries(data))
        writeFileSync(join(dir, k), Buffer.from(b64, "base64"), { mode: v.secret.defaultMode ?? 0o644 });
    }
    mounts.push([m.mountPath, dir]);
  }
  mounts.sort((a, b) => b[0].length - a[0].length);
  const mapPath = (s) => {
    for (const [from, to] of Object.entries(imageMap)) if (s === from) return to;
    for (const [mp, dir] of mounts) if (s === mp || s.startsWith(mp + "/")) return dir + s.slice(mp.length);
    return s;
  };
  const mapInString = (s) => s.replace(/(^|[=,])(\/[^,=\s]*)/g, (all, pre, p) => pre + mapPath(p));
  // Environment, in order, with $(VAR) expanded from earlier entries.
  const env = { PATH: process.env.PATH };
  const expand = (s) => s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, n) => (n in env ? env[n] : all));
  for (const e of c.env || []) {
    let v = e.value;
    const f = e.valueFrom?.fieldRef?.fieldPath;
    if (f === "metadata.annotations['batch.kubernetes.io/job-completion-index']") v = String(index);
    else if (f === "status.podIP") v = "127.0.0.1";
    else if (f === "metadata.name") v = name;
    else if (e.valueFrom) throw new Error(`env ${e.name}: valueFrom ${JSON.stringify(e.valueFrom)} is not played here`);
    env[e.name] = mapInString(expand(v ?? ""));
  }
  env.JOB_COMPLETION_INDEX = String(index); // the Job controller adds it too
  Object.assign(env, override.env || {});
  // Cluster DNS: the etcd members are this host's etcd.
  env.ECOORD_ELASTIC_SERVER = env.ECOORD_ELASTIC_SERVER.split(",").map(() => etcdEndpoint).join(",");
  const metrics = await freePort();
  let argv = [...(c.command || []), ...(c.args || [])].map((a) => mapInString(expand(a)));
  argv = argv.map((a) => (a.startsWith("--metrics_port=") ? `--metrics_port=${metrics}` : a));
  if (override.args) argv = override.args(argv);
  if (argv[0] === "/usr/bin/tini" && !existsSync("/usr/bin/tini")) argv = argv.slice(argv[1] === "--" ? 2 : 1);
  argv = argv.map((a) => imageMap[a] ?? a);
  const log = join(root, "container.log");
  const out = (await import("node:fs")).openSync(log, "a");
  const proc = spawn(argv[0], argv.slice(1), { env, stdio: ["ignore", out, out], cwd: env.HOME || root });
  const pod = { name, index, proc, env, argv, metrics, log, exit: null, deleting: false, job };
  allPods.push(pod);
  pod.exited = new Promise((res) => proc.on("exit", (code, sig) => {
    pod.exit = code !== null ? code : 128 + ({ SIGKILL: 9, SIGTERM: 15 }[sig] ?? 0);
    pod.exitAt = Date.now();
    res(pod.exit);
  }));
  return pod;
}

async function terminate(pod, grace) {
  pod.deleting = true;
  if (pod.exit !== null) return { code: pod.exit, withinGrace: true };
  const t0 = Date.now();
  pod.proc.kill("SIGTERM");
  const timer = setTimeout(() => pod.exit === null && pod.proc.kill("SIGKILL"), grace * 1000);
  const code = await pod.exited;
  clearTimeout(timer);
  return { code, withinGrace: Date.now() - t0 < grace * 1000, ms: Date.now() - t0 };
}

// ---------------------------------------------------------------- a Job
function policyAction(job, code) {
  for (const r of job.spec.podFailurePolicy?.rules || []) {
    const oc = r.onExitCodes;
    if (!oc || (oc.containerName && oc.containerName !== "agent")) continue;
    const hit = (oc.values || []).includes(code);
    if ((oc.operator === "In" && hit) || (oc.operator === "NotIn" && !hit && code !== 0)) return r.action;
  }
  return "Count"; // no rule matched: counts against backoffLimit
}

class JobCtl {
  constructor(obj, override = {}) {
    this.obj = obj;
    this.override = override;
    this.completions = obj.spec.completions;
    this.grace = obj.spec.template.spec.terminationGracePeriodSeconds ?? 30;
    this.backoff = obj.spec.backoffLimit ?? 6;
    this.failures = 0;
    this.succeeded = new Set();
    this.pods = new Map(); // index -> current pod
    this.history = []; // [index, name, exit, action]
    this.state = "Running";
    this.done = new Promise((r) => (this.finish = r));
  }
  async start() {
    for (let i = 0; i < this.completions; i++) await this.run(i);
  }
  async run(i) {
    const pod = await startPod(this.obj, i, this.override);
    this.pods.set(i, pod);
    pod.exited.then((code) => this.onExit(pod, code));
  }
  async onExit(pod, code) {
    if (this.state !== "Running") return;
    if (pod.deleting) { this.history.push([pod.index, pod.name, code, "deleted"]); return; }
    if (code === 0) {
      this.history.push([pod.index, pod.name, 0, "Succeeded"]);
      this.succeeded.add(pod.index);
      if ([...Array(this.completions).keys()].every((i) => this.succeeded.has(i))) this.end("Complete");
      return;
    }
    const action = policyAction(this.obj, code);
    this.history.push([pod.index, pod.name, code, action]);
    if (action === "FailJob") return this.end("Failed", `pod ${pod.name} exited ${code}: FailJob`);
    if (action === "Count" && ++this.failures > this.backoff) return this.end("Failed", "BackoffLimitExceeded");
    await this.run(pod.index); // Count or Ignore: a new pod for the index (the old one has exited)
  }
  async end(state, why = "") {
    this.state = state;
    this.why = why;
    const live = [...this.pods.values()].filter((p) => p.exit === null);
    await Promise.all(live.map((p) => terminate(p, this.grace)));
    this.finish(state);
  }
  async scale(n) {
    const old = this.completions;
    this.completions = n;
    if (n > old) for (let i = old; i < n; i++) await this.run(i);
    const res = [];
    for (let i = n; i < old; i++) {
      const p = this.pods.get(i);
      this.pods.delete(i);
      this.succeeded.delete(i);
      if (p) res.push(await terminate(p, this.grace));
    }
    return res;
  }
  async deleteJob() {
    this.state = "Deleted";
    const live = [...this.pods.values()].filter((p) => p.exit === null);
    return Promise.all(live.map((p) => terminate(p, this.grace)));
  }
}

// ---------------------------------------------------------------- observing
function status(pod) {
  const r = spawnSync(join(build, "ecoord"), ["status", "--json"], { env: pod.env, encoding: "utf8", timeout: 10000 });
  try { return JSON.parse(r.stdout); } catch { return null; }
}
const members = (s) => (s?.nodes || []).filter((n) => n.in_epoch).map((n) => n.node_id).sort().join(",");
async function world(pod, want, ms = 60000) {
  return until(`epoch with members ${want}`, () => {
    const s = status(pod);
    return s?.epoch && members(s) === want ? s : null;
  }, ms);
}
const ready = (pod) => new Promise((res) => {
  const req = http.get({ host: "127.0.0.1", port: pod.metrics, path: "/readyz", timeout: 2000 }, (r) => { r.resume(); res(r.statusCode === 200); });
  req.on("error", () => res(false));
  req.on("timeout", () => { req.destroy(); res(false); });
});
const tail = (pod) => { try { return readFileSync(pod.log, "utf8").split("\n").slice(-15).join("\n"); } catch { return ""; } };

// ---------------------------------------------------------------- the story
console.log("1..14");
const spec = jobObj.spec;
note(`Job ${jobObj.metadata.name}: completions ${spec.completions}, grace ${spec.template.spec.terminationGracePeriodSeconds} s, ` +
  `policy ${JSON.stringify((spec.podFailurePolicy?.rules || []).map((r) => [r.action, r.onExitCodes?.values ?? r.onPodConditions?.[0]?.type]))}`);
const job = new JobCtl(jobObj);
await job.start();
const p0 = job.pods.get(0);
note(`pod ${p0.name}: ${p0.argv.join(" ")}`);
let s = await world(p0, "train-0,train-1");
// The trainer's steps show the worker library in: it reads the same TLS
// files and password the agent passed on, as the job's etcd user.
const stepping = s && await until("linreg steps at world 2", () => /linreg step=\d+ .*world=2 /.test(readFileSync(p0.log, "utf8")), 30000);
ok(s && stepping, "the Job's two pods form one job as nodes train-0 and train-1, and train at world 2 (agent and worker library over TLS, as user ecoord-job-train)",
  tail(p0) + "\n" + tail(job.pods.get(1)));
const allReady = await until("/readyz of both pods", async () => (await ready(job.pods.get(0))) && (await ready(job.pods.get(1))), 30000);
ok(allReady, "both pods pass the manifest's readiness probe (/readyz on --metrics_port)");

// Scale up: completions and parallelism 2 -> 3.
await job.scale(3);
s = await world(p0, "train-0,train-1,train-2");
ok(s, "scaling the Job to 3 starts index 2, which joins as train-2", tail(job.pods.get(2)));
const e3 = s?.epoch?.number ?? 0;

// Scale down: 3 -> 2; the kubelet sends SIGTERM and waits out the grace period.
const t0 = Date.now();
const [down] = await job.scale(2);
ok(down && down.code === 143 && down.withinGrace,
  `scaling down to 2: the pod of index 2 leaves on SIGTERM within terminationGracePeriodSeconds (exit ${down?.code} after ${down?.ms} ms)`);
s = await world(p0, "train-0,train-1");
const leaveMs = Date.now() - t0;
ok(s && s.epoch.number > e3 && s.epoch.reason === "leave",
  `the others re-form without it at once (epoch ${s?.epoch?.number}, reason ${s?.epoch?.reason}, ${leaveMs} ms after SIGTERM), not counted as a failure`,
  JSON.stringify(s?.epoch));
const eLeave = s?.epoch?.number ?? 0;

// A node fails: its agent is killed (exit 137, no rule matches: Count).
const old1 = job.pods.get(1);
old1.proc.kill("SIGKILL");
await old1.exited;
const new1 = await until("a new pod for index 1", () => job.pods.get(1) !== old1 && job.pods.get(1), 10000);
ok(new1 && job.failures === 1 && job.history.some((h) => h[1] === old1.name && h[2] === 137 && h[3] === "Count"),
  `a killed agent (exit 137) counts against backoffLimit (${job.failures} of ${job.backoff}) and index 1 gets a new pod ${new1?.name}`);
s = await world(p0, "train-0,train-1");
const back = s && s.epoch.number > eLeave && (s.nodes || []).some((n) => n.node_id === "train-1" && n.in_epoch);
ok(back, `the new pod rejoins as the same node train-1 (epoch ${s?.epoch?.number}, reason ${s?.epoch?.reason})`, new1 && tail(new1));

// A node whose processes keep failing: past --max_restart (3, the default)
// its agent leaves the job and exits 101 (--node_failure_exit=101 in the
// manifest), which the policy counts: a new pod for the index, while the
// other node trains on; not a failed Job (exit 1 would be).
function linregUnder(root) {
  const kids = new Map();
  for (const d of (spawnSync("ls", ["/proc"]).stdout || "").toString().split("\n")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch { /* gone */ }
  }
  const out = [];
  const todo = [root];
  while (todo.length) {
    const p = todo.pop();
    for (const k of kids.get(p) || []) {
      todo.push(k);
      // by the executable's name: the agent's and its janitor's command
      // lines name the program too
      try { if (readFileSync(`/proc/${k}/comm`, "utf8").trim() === "linreg") out.push(k); } catch { /* gone */ }
    }
  }
  return out;
}
const bad = job.pods.get(1);
let killed = 0;
for (let k = 0, prev = 0; k < 4; k++) {
  // a new process that has trained a step (a failure while its epoch is
  // still being replaced is folded into that change, not counted)
  const t = await until(`a training process of ${bad.name} stepping`, () => {
    const x = bad.exit === null && linregUnder(bad.proc.pid).find((y) => y !== prev);
    return x && new RegExp(`linreg step=\\d+ .* pid=${x} `).test(readFileSync(bad.log, "utf8")) && x;
  }, 30000);
  if (!t) break;
  try { process.kill(t, "SIGKILL"); killed++; } catch { /* already gone */ }
  prev = t;
}
const badExit = await Promise.race([bad.exited, sleep(30000 * mult).then(() => null)]);
const new1b = await until("a new pod for index 1 after exit 101", () => job.pods.get(1) !== bad && job.pods.get(1), 10000);
ok(killed === 4 && badExit === 101 && job.state === "Running" && new1b &&
  job.history.some((h) => h[1] === bad.name && h[2] === 101 && h[3] === "Count"),
  `a node whose training process is killed past --max_restart exits 101 (--node_failure_exit) and gets a new pod by the policy (Count), the Job still running (${killed} kills, exit ${badExit}, ${job.failures} of ${job.backoff} failures)`,
  tail(bad));
s = await world(p0, "train-0,train-1");
ok(s && (s.nodes || []).some((n) => n.node_id === "train-1" && n.in_epoch),
  `the replacement rejoins as train-1 (epoch ${s?.epoch?.number}, reason ${s?.epoch?.reason})`, new1b && tail(new1b));

// A pod whose ECOORD_NP differs (what a changed template would start): it
// is refused, exits 1, and its own Job fails by the policy (FailJob); the
// running job keeps its members and its leader.
const other = new JobCtl({ ...jobObj, metadata: { ...jobObj.metadata, name: "train-resized" },
  spec: { ...jobObj.spec, completions: 1 } }, { env: { ECOORD_NP: "1:2" },
  args: (a) => a.map((x) => (x === "--node_id=train-0" ? "--node_id=train-9" : x)) });
const leaderBefore = status(p0)?.leader;
await other.start();
const otherState = await Promise.race([other.done, sleep(60000 * mult).then(() => "timeout")]);
const op = other.history[0] || [];
const otherLog = other.pods.get(0) ? readFileSync(other.pods.get(0).log, "utf8") : "";
ok(otherState === "Failed" && op[2] === 1 && op[3] === "FailJob" && /--np=1:2 but job train runs --np=1:3/.test(otherLog),
  `a pod with ECOORD_NP=1:2 beside a --np=1:3 job exits 1 and its Job fails (${otherState}, exit ${op[2]}, ${op[3]})`,
  tail(other.pods.get(0) || {}));
s = status(p0);
ok(members(s) === "train-0,train-1" && s?.leader === leaderBefore,
  `the running job is untouched: members ${members(s)}, leader ${s?.leader} (was ${leaderBefore})`);

// Deleting the Job stops every pod gracefully.
const gone = await job.deleteJob();
ok(gone.length === 2 && gone.every((g) => g.code === 143 && g.withinGrace),
  `deleting the Job: every pod exits 143 on SIGTERM within the grace period (${gone.map((g) => `${g.code} after ${g.ms} ms`).join(", ")})`);

// Run to completion: the same Job with a training program that ends (the
// example trainer's --steps lowered); every agent exits 0, the Job is
// Complete and no pod is started again.
const fin = new JobCtl(jobObj, { args: (a) => a.map((x) => (x.startsWith("--steps=") ? "--steps=30" : x.startsWith("--delay-ms=") ? "--delay-ms=20" : x)) });
await fin.start();
const finState = await Promise.race([fin.done, sleep(120000 * mult).then(() => "timeout")]);
ok(finState === "Complete" && fin.history.length === 2 && fin.history.every((h) => h[2] === 0),
  `a run whose training ends: every agent exits 0 and the Job is Complete with no pod restarted (${finState}: ${fin.history.map((h) => `${h[1]} exit ${h[2]}`).join(", ")})`,
  tail(fin.pods.get(0)) + "\n" + tail(fin.pods.get(1)));
await until("no pod left running", () => [...fin.pods.values()].every((p) => p.exit !== null), 10000);
ok([...fin.pods.values()].every((p) => p.exit === 0), "after completion no agent is left running or restarted");
process.exit(failed ? 1 : 0);
