// A connector's figures, summed over its tasks, from GET /connectors/{name}/tasks/{id}/metrics ("runtime":
// Kafka's task metric names), and its records/s in and out computed from the counters' deltas between
// polls. A worker whose task metrics have no "runtime" yet is read through GET /metrics instead (records
// written by sources, sent by sinks: out only).
import { get, getText, seg } from "./api.js";

/** Samples kept per connector: about three minutes at one every two seconds. */
export const KEEP = 90;
const MIN_GAP = 1.0; // seconds between samples: closer ones would make noisy rates

const COUNTERS = {
  source: ["source-record-poll-total", "source-record-write-total"],
  sink: ["sink-record-read-total", "sink-record-send-total"],
};
const PROMETHEUS = {
  source: "kafka_connect_source_task_metrics_source_record_write_total",
  sink: "kafka_connect_sink_task_metrics_sink_record_send_total",
};

const history = new Map(); // connector -> {last: {t, in, out}, points: [{t, in, out}]}

async function taskMetrics(name, task) {
  try {
    return await get(`connectors/${seg(name)}/tasks/${task.id}/metrics`);
  } catch {
    return null; // not running (404), or on a worker that cannot be reached: nothing to count
  }
}

async function prometheusTotals() {
  const out = new Map();
  let text = "";
  try {
    text = await getText("metrics");
  } catch {
    return out;
  }
  const line = /^(\w+)\{connector="((?:[^"\\]|\\.)*)",task="(\d+)"\} ([-+\d.eE]+|NaN)$/;
  for (const row of text.split("\n")) {
    const m = line.exec(row);
    if (m) out.set(`${m[1]}|${m[2].replace(/\\(.)/g, "$1")}|${m[3]}`, Number(m[4]));
  }
  return out;
}

const sum = (values) => (values.length ? values.reduce((a, b) => a + b, 0) : null);

/** Totals over a connector's tasks: records in and out, DLQ records, offset commit times, sink lag per
 * partition, and the first task's own figures (a CDC task's snapshot and slot). */
async function summarize(name, type, tasks, figures) {
  const [inKey, outKey] = COUNTERS[type] || [];
  const runtimes = figures.filter((f) => f && f.runtime).map((f) => f.runtime);
  const summary = { in: null, out: null, dlq: null, commitAvg: null, commitMax: null, lag: null, own: null };
  if (runtimes.length && inKey) {
    summary.in = sum(runtimes.map((r) => r[inKey] ?? 0));
    summary.out = sum(runtimes.map((r) => r[outKey] ?? 0));
    summary.dlq = sum(runtimes.map((r) => r["deadletterqueue-produce-requests"] ?? 0));
    const avgs = runtimes.map((r) => r["offset-commit-avg-time-ms"]).filter((v) => typeof v === "number");
    const maxes = runtimes.map((r) => r["offset-commit-max-time-ms"]).filter((v) => typeof v === "number");
    summary.commitAvg = avgs.length ? sum(avgs) / avgs.length : null;
    summary.commitMax = maxes.length ? Math.max(...maxes) : null;
    if (type === "sink") summary.lag = runtimes.flatMap((r) => r["consumer-lag"] || []);
  } else if (PROMETHEUS[type] && figures.some(Boolean)) {
    const totals = await prometheusTotals();
    const found = tasks.map((t) => totals.get(`${PROMETHEUS[type]}|${name}|${t.id}`)).filter((v) => v !== undefined);
    summary.out = sum(found);
  }
  const own = figures.find((f) => f && f.metrics && Object.keys(f.metrics).length);
  summary.own = own ? own.metrics : null;
  return summary;
}

function record(name, summary) {
  const now = performance.now() / 1000;
  let entry = history.get(name);
  if (!entry) {
    entry = { last: null, points: [] };
    history.set(name, entry);
  }
  const last = entry.last;
  if (last && now - last.t < MIN_GAP) return entry;
  if (last) {
    const dt = now - last.t;
    // A counter that went down (a task restarted) counts as no records, not as a negative rate.
    const delta = (key) => (summary[key] === null || last[key] === null ? null
      : Math.max(0, summary[key] - last[key]) / dt);
    entry.points.push({ t: now, in: delta("in"), out: delta("out") });
    if (entry.points.length > KEEP) entry.points.splice(0, entry.points.length - KEEP);
  }
  entry.last = { t: now, in: summary.in, out: summary.out };
  return entry;
}

/** Poll a connector's tasks once: {figures (per task, null when not readable), summary, points, current}. */
export async function sample(name, type, tasks) {
  const figures = await Promise.all(tasks.map((t) => taskMetrics(name, t)));
  const summary = await summarize(name, type, tasks, figures);
  const entry = record(name, summary);
  const current = entry.points.length ? entry.points[entry.points.length - 1] : { in: null, out: null };
  return { figures, summary, points: entry.points, current };
}

/** The seconds the kept samples span. */
export function span(points) {
  return points.length > 1 ? points[points.length - 1].t - points[0].t : 0;
}

export function forget(name) {
  history.delete(name);
}
