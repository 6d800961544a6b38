// Topics: every topic with its partitions and offsets (GET /admin/topics); one topic's partitions with
// their start and end offsets (GET /admin/topics/{topic}) and a live tail of its newest records
// (GET /admin/topics/{topic}/records?limit=N).
import { get, seg } from "../api.js";
import { badge, empty, fill, h, num, stat, table, time } from "../dom.js";
import { POLL_MS } from "../page.js";

export function topicList(page) {
  const body = h("div", {}, empty("Loading topics…"));
  const count = h("span", { class: "sub" });
  const search = h("input", { type: "search", placeholder: "Filter by name", id: "topic-filter" });
  const internal = h("input", { type: "checkbox", id: "show-internal" });
  let last = [];
  const render = () => {
    const words = search.value.trim().toLowerCase();
    const shown = last.filter((t) => (internal.checked || !t.internal) && t.topic.toLowerCase().includes(words));
    count.textContent = `${shown.length} of ${last.length} topics`;
    fill(body, shown.length ? table(["Topic", ["Partitions", "num"], ["Records", "num"], ["Start offset", "num"],
      ["End offset", "num"]], shown.map((t) => h("tr", { "data-topic": t.topic },
      h("td", { class: "wrap" }, h("a", { href: `#/topics/${seg(t.topic)}` }, t.topic),
        t.internal ? [" ", badge("internal", "STOPPED")] : null),
      h("td", { class: "num" }, num(t.partitions)), h("td", { class: "num records" }, num(t.records)),
      h("td", { class: "num start" }, num(t.start_offset)), h("td", { class: "num end" }, num(t.end_offset)))),
    { class: "topics" }) : empty("No topics match."));
  };
  search.addEventListener("input", render);
  internal.addEventListener("change", render);
  page.main.append(
    h("div", { class: "page-head" }, h("h1", {}, "Topics"), count, h("span", { class: "grow" }),
      h("div", { class: "toolbar" }, search, h("label", { class: "check", for: "show-internal" }, internal,
        "Internal topics"))),
    page.alert,
    h("div", { class: "panel flush" }, body),
    h("p", { class: "muted small" }, "Offsets are summed over a topic's partitions."));
  page.every(POLL_MS, async () => {
    const topics = await get("admin/topics");
    if (!page.alive) return;
    last = topics;
    render();
  });
}

/** A key, value or header value as the API gives it: text, {"base64": ...} or null. */
function data(value) {
  if (value === null || value === undefined) return h("span", { class: "null" }, "null");
  if (typeof value === "object") {
    return h("span", { class: "b64", title: "not UTF-8 text: base64" }, `base64:${value.base64}`);
  }
  return value;
}

export function topicDetail(page, topic) {
  const path = `admin/topics/${seg(topic)}`;
  const stats = h("div", { class: "stats" });
  const partitions = h("div");
  const configs = h("div");
  const tail = h("div", {}, empty("Reading the newest records…"));
  const limit = h("select", { id: "tail-limit" }, [10, 20, 50, 100].map((n) =>
    h("option", { value: n, selected: n === 20 }, `${n} newest`)));
  let paused = false;
  const pause = h("button", { type: "button", id: "tail-pause" }, "Pause");
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
  });
  page.main.append(
    h("div", { class: "crumb" }, h("a", { href: "#/topics" }, "Topics"), " /"),
    h("div", { class: "page-head" }, h("h1", { class: "topic-name" }, topic)),
    page.alert,
    h("div", { class: "grid two" },
      h("section", { class: "panel flush" }, h("h2", {}, "Partitions"), partitions),
      h("section", { class: "panel" }, h("h2", {}, "Summary"), stats,
        h("h2", { class: "spaced" }, "Config overrides"), configs)),
    h("section", { class: "panel flush tail" },
      h("div", { class: "page-head tail-head" }, h("h2", {}, "Live tail"), h("span", { class: "grow" }),
        h("div", { class: "toolbar" }, limit, pause)),
      tail));

  let seen = new Set(); // the records shown last time: the others are highlighted as new
  let first = true;
  page.every(POLL_MS, async () => {
    const info = await get(path);
    // An internal topic's records (connector configs among them) are not served: none are asked for.
    const records = paused || info.internal ? null : await get(`${path}/records?limit=${limit.value}`);
    if (!page.alive) return;
    const total = (key) => info.partitions.reduce((a, p) => a + p[key], 0);
    fill(stats, stat("Partitions", num(info.partitions.length)), stat("Records", num(total("records"))),
      stat("End offsets", num(total("end_offset")), { figure: "end-offset" }));
    const overrides = Object.keys(info.configs).sort();
    fill(configs, overrides.length ? h("table", { class: "kv" }, h("tbody", {}, overrides.map((k) =>
      h("tr", {}, h("th", {}, k), h("td", {}, info.configs[k])))))
      : h("p", { class: "muted" }, "None: the broker's defaults."));
    fill(partitions, table([["Partition", "num"], ["Leader", "num"], "Replicas", "In sync", ["Start", "num"],
      ["End", "num"], ["Records", "num"]], info.partitions.map((p) => h("tr", { "data-partition": p.partition },
      h("td", { class: "num" }, p.partition), h("td", { class: "num" }, p.leader), h("td", {}, p.replicas.join(", ")),
      h("td", {}, p.isr.join(", ")), h("td", { class: "num start" }, num(p.start_offset)),
      h("td", { class: "num end" }, num(p.end_offset)), h("td", { class: "num" }, num(p.records))))));
    if (info.internal) {
      fill(tail, empty("Records of internal topics are not shown: they hold the workers' state."));
      return;
    }
    if (records === null) return;
    const shown = new Set();
    const rows = records.records.map((r) => {
      const id = `${r.partition}:${r.offset}`;
      const fresh = !first && !seen.has(id);
      shown.add(id);
      return h("tr", { class: fresh ? "fresh" : null, "data-offset": r.offset, "data-partition": r.partition },
        h("td", { class: "mono small nowrap", title: r.timestamp_type }, time(r.timestamp)),
        h("td", { class: "num" }, r.partition), h("td", { class: "num" }, r.offset),
        h("td", { class: "value-cell key" }, data(r.key)),
        h("td", { class: "value-cell value" }, data(r.value), r.truncated ? h("span", { class: "muted" }, " …") : null),
        h("td", { class: "value-cell headers" }, r.headers.length
          ? r.headers.map((x) => h("div", {}, `${x.key}: `, data(x.value)))
          : h("span", { class: "muted" }, "–")));
    });
    first = false;
    seen = shown;
    const columns = [["Timestamp", "nowrap"], ["Partition", "num"], ["Offset", "num"], "Key", ["Value", "wide"], "Headers"];
    fill(tail, rows.length ? table(columns, rows,
      { class: "records" }) : empty("The topic holds no records."));
  });
}
