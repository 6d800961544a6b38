// Connectors: every connector with its state, its tasks and the worker each runs on, and its records/s
// in and out with a sparkline. GET /connectors?expand=status&expand=info, and each task's metrics.
import { sparkline } from "../chart.js";
import { get, seg } from "../api.js";
import { badge, empty, fill, h, num, rate, shortClass, table } from "../dom.js";
import { POLL_MS } from "../page.js";
import { sample } from "../throughput.js";

export function taskChips(tasks) {
  if (!tasks.length) return h("span", { class: "muted" }, "no tasks");
  return tasks.map((t) => h("span", { class: "task-chip", "data-task": t.id },
    h("span", { class: "muted" }, `#${t.id}`), badge(t.state), h("span", { class: "muted small" }, t.worker_id)));
}

export function connectorList(page) {
  const body = h("div", {}, empty("Loading connectors…"));
  const count = h("span", { class: "sub" });
  page.main.append(
    h("div", { class: "page-head" }, h("h1", {}, "Connectors"), count, h("span", { class: "grow" }),
      h("a", { class: "button primary", href: "#/new" }, "New connector")),
    page.alert,
    h("div", { class: "panel flush" }, body));

  page.every(POLL_MS, async () => {
    const all = await get("connectors?expand=status&expand=info");
    const names = Object.keys(all).sort();
    const samples = await Promise.all(names.map((name) => {
      const { status, info } = all[name];
      return sample(name, info.type, status.tasks);
    }));
    if (!page.alive) return;
    count.textContent = `${names.length} connector${names.length === 1 ? "" : "s"}`;
    if (!names.length) {
      fill(body, empty(h("span", {}, "No connectors yet. ", h("a", { href: "#/new" }, "Create one"), ".")));
      return;
    }
    const rows = names.map((name, i) => {
      const { status, info } = all[name];
      const { current, summary, points } = samples[i];
      const link = `#/connectors/${seg(name)}`;
      return h("tr", { "data-connector": name },
        h("td", { class: "wrap" }, h("a", { href: link, class: "name" }, name)),
        h("td", {}, badge(info.type)),
        h("td", { class: "class-name" }, shortClass(info.config["connector.class"])),
        h("td", { class: "state" }, badge(status.connector.state)),
        h("td", {}, taskChips(status.tasks)),
        h("td", { class: "num rate-in" }, rate(current.in)),
        h("td", { class: "num rate-out" }, rate(current.out)),
        h("td", { class: "num total-out" }, num(summary.out)),
        h("td", {}, sparkline(points.slice(-45))));
    });
    fill(body, table(["Connector", "Type", "Class", "State", "Tasks · worker", ["In", "num"],
      ["Out", "num"], ["Records out", "num"], "Last 90 s"], rows, { class: "connectors" }));
  });
}
