// One connector: state and actions (edit, pause, resume, restart, stop, delete), records/s in and out
// over the last minutes, its tasks, a sink's lag per partition, DLQ records, the FAILED trace, a CDC
// task's snapshot and slot, and its config.
import { api, ApiError, get, seg } from "../api.js";
import { rateChart } from "../chart.js";
import { badge, bytes, confirmDialog, empty, fill, h, num, rate, shortClass, stat, table, toast } from "../dom.js";
import { POLL_MS } from "../page.js";
import { forget, sample, span } from "../throughput.js";

const DLQ_TOPIC = "errors.deadletterqueue.topic.name";
// Config values not shown on screen (the REST API still answers them, as Kafka Connect's does).
const SECRET = /password|secret|jaas\.config|credentials/i;

function isCdc(info, own) {
  return (info.type === "source" && /postgres/i.test(info.config["connector.class"] || "")) ||
    Boolean(own && own["slot.name"] !== undefined);
}

/** A sink's lag per partition from its tasks' "consumer-lag", or else from its group (connect-<name>). */
async function sinkLag(name, summary) {
  if (summary.lag) return summary.lag;
  try {
    const group = await get(`admin/groups/${seg(`connect-${name}`)}`);
    return group.offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.committed_offset,
                                       "end-offset": o.end_offset, lag: o.lag }));
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return [];
    throw err;
  }
}

/** Records in the dead letter queue: the tasks' count, or else what the DLQ topic holds. */
async function dlqRecords(config, summary) {
  const topic = config[DLQ_TOPIC];
  if (summary.dlq !== null) return { count: summary.dlq, topic };
  if (!topic) return { count: null, topic };
  try {
    return { count: (await get(`admin/topics/${seg(topic)}`)).partitions.reduce((a, p) => a + p.records, 0), topic };
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return { count: 0, topic };
    throw err;
  }
}

function bar(done, total, thresholds = null) {
  const share = total ? Math.min(1, done / total) : 0;
  let cls = "";
  if (thresholds && share >= thresholds[1]) cls = "danger";
  else if (thresholds && share >= thresholds[0]) cls = "warn";
  const fillEl = h("span");
  fillEl.style.width = `${(share * 100).toFixed(1)}%`;
  return h("div", { class: ["bar", cls], title: `${(share * 100).toFixed(1)}%` }, fillEl);
}

function cdcPanel(own) {
  if (!own) return h("p", { class: "muted" }, "The task has not reported its figures yet.");
  const snap = own.snapshot;
  const stream = own.streaming || {};
  const parts = [
    h("div", { class: "stats" }, stat("Phase", own.phase || "–", { figure: "cdc-phase" }),
      stat("Slot", own["slot.name"] || "–", { figure: "cdc-slot" })),
  ];
  if (snap) {
    parts.push(h("h2", {}, "Snapshot"),
      h("div", { class: "small" }, `Tables ${num(snap["tables.done"])} of ${num(snap["tables.total"])}`,
        snap.completed ? " · completed" : snap.running ? ` · scanning ${snap.table || ""}` : ""),
      bar(snap["tables.done"], snap["tables.total"]),
      // The estimate is the planner's (pg_class.reltuples): unknown (0) until the table was analyzed.
      snap["rows.estimated"] >= snap["rows.scanned"] && snap["rows.estimated"] > 0
        ? [h("div", { class: "small" }, `Rows ${num(snap["rows.scanned"])} of about ${num(snap["rows.estimated"])}`),
          bar(snap["rows.scanned"], snap["rows.estimated"])]
        : h("div", { class: "small" }, `Rows ${num(snap["rows.scanned"])} scanned`));
  }
  const retained = stream["retained.wal.bytes"];
  const limit = stream["slot.max.retained.wal.bytes"];
  parts.push(h("h2", { class: "spaced" }, "Streaming"),
    table(["Figure", ["Value", "num"]], [
      h("tr", {}, h("td", {}, "Change events"), h("td", { class: "num", "data-figure": "cdc-events" }, num(stream.events))),
      h("tr", {}, h("td", {}, "Confirmed LSN"), h("td", { class: "num mono" }, stream["confirmed.lsn"] || "–")),
      h("tr", {}, h("td", {}, "Retained WAL"), h("td", { class: "num", "data-figure": "retained-wal" },
        bytes(retained), limit ? ` of ${bytes(limit)}` : "")),
    ]));
  if (retained !== null && retained !== undefined && limit) parts.push(bar(retained, limit, [0.5, 0.8]));
  return parts;
}

function traces(status) {
  const failed = [];
  if (status.connector.state === "FAILED") failed.push(["Connector", status.connector]);
  for (const t of status.tasks) if (t.state === "FAILED") failed.push([`Task ${t.id}`, t]);
  return failed.map(([what, st]) => h("div", { class: "trace-block" },
    h("div", {}, h("strong", {}, what), " failed on ", h("span", { class: "mono" }, st.worker_id)),
    h("pre", { class: "trace" }, st.trace || "(no trace)")));
}

export function connectorDetail(page, name) {
  const path = `connectors/${seg(name)}`;
  const state = h("span", { class: "state" });
  const kind = h("span");
  const cls = h("span", { class: "sub" });
  const actions = h("div", { class: "toolbar actions" });
  const stats = h("div", { class: "stats" });
  const chart = h("div", { class: "chart-box" });
  const side = h("div");
  const tasks = h("div");
  const extra = h("div");
  const errors = h("div");
  const config = h("div");
  let refresh = () => {};

  page.main.append(
    h("div", { class: "crumb" }, h("a", { href: "#/connectors" }, "Connectors"), " /"),
    h("div", { class: "page-head" }, h("h1", { class: "connector-name" }, name), state, kind, cls,
      h("span", { class: "grow" }), actions),
    page.alert,
    h("div", { class: "grid two" },
      h("section", { class: "panel throughput" }, h("h2", {}, "Throughput"), stats, chart,
        h("div", { class: "legend" }, h("span", { class: "in" }, h("i"), "records in"),
          h("span", { class: "out" }, h("i"), "records out"))),
      h("section", { class: "panel" }, h("h2", {}, "Summary"), side)),
    errors,
    h("section", { class: "panel flush" }, h("h2", {}, "Tasks"), tasks),
    extra,
    h("section", { class: "panel flush config" }, h("h2", {}, "Configuration"), config));

  async function act(label, method, suffix, okText) {
    try {
      await api(method, `${path}/${suffix}`);
      toast(okText);
    } catch (err) {
      toast(`${label} failed: ${err.message}`, "error");
    }
    refresh();
  }

  async function remove() {
    if (!(await confirmDialog(`Delete ${name}?`, `The connector ${name} and its tasks stop and its config is removed. ` +
      "Its topics and committed offsets stay.", "Delete"))) return;
    try {
      await api("DELETE", path);
      forget(name);
      toast(`Deleted ${name}`);
      location.hash = "#/connectors";
    } catch (err) {
      toast(`Delete failed: ${err.message}`, "error");
    }
  }

  function renderActions(connectorState) {
    const button = (label, action, enabled, extraCls) => h("button", { type: "button", class: extraCls,
      "data-action": label.toLowerCase(), disabled: !enabled, onclick: action }, label);
    fill(actions,
      h("a", { class: "button", href: `#/connectors/${seg(name)}/edit`, "data-action": "edit" }, "Edit"),
      button("Pause", () => act("Pause", "PUT", "pause", `Pausing ${name}`), connectorState === "RUNNING"),
      button("Resume", () => act("Resume", "PUT", "resume", `Resuming ${name}`),
        connectorState === "PAUSED" || connectorState === "STOPPED"),
      button("Restart", () => act("Restart", "POST", "restart?includeTasks=true", `Restarting ${name} and its tasks`),
        connectorState !== "STOPPED"),
      button("Stop", () => act("Stop", "PUT", "stop", `Stopping ${name}`), connectorState !== "STOPPED"),
      button("Delete", remove, true, "danger"));
  }

  let lastState = null;
  let lastConfig = null;
  const poll = async () => {
    let status;
    let info;
    try {
      [status, info] = await Promise.all([get(`${path}/status`), get(path)]);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        fill(page.main, h("div", { class: "page-head" }, h("h1", {}, name)),
          h("div", { class: "notice" }, `There is no connector ${name}. `,
            h("a", { href: "#/connectors" }, "All connectors")));
        page.stop();
        return;
      }
      throw err;
    }
    const { figures, summary, points, current } = await sample(name, info.type, status.tasks);
    const sink = info.type === "sink";
    const cdc = isCdc(info, summary.own);
    const [lag, dlq, used] = await Promise.all([sink ? sinkLag(name, summary) : null, dlqRecords(info.config, summary),
      get(`${path}/topics`).then((t) => (t[name] || {}).topics || []).catch(() => [])]);
    if (!page.alive) return;

    fill(state, badge(status.connector.state));
    fill(kind, badge(info.type));
    fill(cls, shortClass(info.config["connector.class"]));
    if (status.connector.state !== lastState) renderActions(status.connector.state);
    lastState = status.connector.state;

    fill(stats, stat("In", rate(current.in), { cls: "in", figure: "rate-in" }),
      stat("Out", rate(current.out), { cls: "out", figure: "rate-out" }),
      stat(sink ? "Records read" : "Records polled", num(summary.in), { figure: "in-total" }),
      stat(sink ? "Records sent" : "Records written", num(summary.out), { figure: "out-total" }));
    fill(chart, rateChart(points, span(points)));

    const totalLag = lag ? lag.reduce((a, p) => a + (p.lag || 0), 0) : null;
    const rows = [
      ["Worker(s)", [...new Set(status.tasks.map((t) => t.worker_id).concat(status.connector.worker_id))].join(", ")],
      ["Topics", used.length ? used.map((t) => h("a", { class: "chip", href: `#/topics/${seg(t)}` }, t))
        : info.config.topics || info.config["topics.regex"] || info.config.topic || "–"],
      ["DLQ records", dlq.topic ? h("span", {}, h("strong", { "data-figure": "dlq" }, num(dlq.count)), " in ",
        h("a", { href: `#/topics/${seg(dlq.topic)}` }, dlq.topic)) : h("span", { "data-figure": "dlq" },
        dlq.count ? num(dlq.count) : "no dead letter queue")],
      ["Offset commit", summary.commitAvg === null ? "–"
        : `${summary.commitAvg.toFixed(1)} ms avg · ${summary.commitMax.toFixed(1)} ms max`],
    ];
    if (sink) rows.push(["Consumer lag", h("strong", { "data-figure": "lag" }, num(totalLag))]);
    fill(side, h("table", { class: "kv plain" }, h("tbody", {}, rows.map(([k, v]) =>
      h("tr", {}, h("th", {}, k), h("td", {}, v))))));

    fill(errors, status.connector.state === "FAILED" || status.tasks.some((t) => t.state === "FAILED")
      ? h("section", { class: "panel errors" }, h("h2", {}, "Error trace"), traces(status)) : null);

    const taskRows = status.tasks.map((t, i) => {
      const rt = figures[i] && figures[i].runtime;
      const counters = sink ? ["sink-record-read-total", "sink-record-send-total"]
        : ["source-record-poll-total", "source-record-write-total"];
      return h("tr", { "data-task": t.id },
        h("td", {}, `#${t.id}`), h("td", {}, badge(t.state)), h("td", { class: "mono" }, t.worker_id),
        h("td", { class: "num" }, num(rt ? rt[counters[0]] : null)),
        h("td", { class: "num" }, num(rt ? rt[counters[1]] : null)),
        h("td", { class: "num" }, rt && typeof rt["offset-commit-avg-time-ms"] === "number"
          ? `${rt["offset-commit-avg-time-ms"].toFixed(1)} ms` : "–"),
        h("td", { class: "num" }, num(rt ? rt["deadletterqueue-produce-requests"] : null)));
    });
    fill(tasks, taskRows.length ? table(["Task", "State", "Worker", [sink ? "Read" : "Polled", "num"],
      [sink ? "Sent" : "Written", "num"], ["Commit avg", "num"], ["DLQ", "num"]], taskRows)
      : empty("No tasks (a stopped connector has none)."));

    const sections = [];
    if (sink) {
      sections.push(h("section", { class: "panel flush lag" }, h("h2", {}, "Consumer lag per partition"),
        lag.length ? table(["Topic", ["Partition", "num"], ["Committed", "num"], ["End offset", "num"], ["Lag", "num"]],
          lag.map((p) => h("tr", { "data-partition": `${p.topic}-${p.partition}` },
            h("td", { class: "wrap" }, h("a", { href: `#/topics/${seg(p.topic)}` }, p.topic)),
            h("td", { class: "num" }, p.partition), h("td", { class: "num" }, num(p.offset)),
            h("td", { class: "num" }, num(p["end-offset"])), h("td", { class: "num lag" }, num(p.lag)))))
          : empty("No partitions assigned yet.")));
    }
    if (cdc) sections.push(h("section", { class: "panel cdc" }, h("h2", {}, "Change data capture"), cdcPanel(summary.own)));
    fill(extra, sections.length === 2 ? h("div", { class: "grid halves" }, sections) : sections);

    const configText = JSON.stringify(info.config);
    if (configText !== lastConfig) {
      lastConfig = configText;
      fill(config, h("table", { class: "kv" }, h("tbody", {}, Object.keys(info.config).sort().map((k) =>
        h("tr", {}, h("th", {}, k), h("td", {}, SECRET.test(k) && info.config[k]
          ? h("span", { class: "muted", title: "hidden on screen" }, "••••••") : info.config[k]))))));
    }
  };
  refresh = () => poll().catch((err) => page.error(err));
  page.every(POLL_MS, poll);
}
