// Building the page with the DOM API only: text goes in as text (never as HTML), so names, configs and
// record values cannot inject markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "text") el.textContent = value;
    else if (key === "class") el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    else if (key === "value" && "value" in el) el.value = value;
    else if (key === "checked" || key === "disabled" || key === "selected") el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An HTML element: h("td", {class: "num"}, "42"). */
export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
/** An SVG element. */
export const s = (tag, attrs, ...children) => build(document.createElementNS(SVG_NS, tag), attrs, children);

/** Replace what ``el`` holds. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const NUMBER = new Intl.NumberFormat("en-US");
export const num = (n) => (n === null || n === undefined ? "–" : NUMBER.format(n));
export function rate(perSecond) {
  if (perSecond === null || perSecond === undefined) return "–";
  if (perSecond >= 100) return `${NUMBER.format(Math.round(perSecond))}/s`;
  return `${perSecond.toFixed(perSecond >= 10 ? 1 : 2).replace(/\.?0+$/, "") || "0"}/s`;
}
export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}
export function time(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  const d = new Date(ms);
  const pad = (x, n = 2) => String(x).padStart(n, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:` +
    `${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export const badge = (text, kind = text) => h("span", { class: ["badge", kind] }, text);

/** The last part of a dotted class name (the whole name stays in the tooltip). */
export const shortClass = (name) => h("span", { title: name }, String(name || "").split(".").pop());

export function toast(message, kind = "info") {
  const el = h("div", { class: ["toast", kind], role: kind === "error" ? "alert" : "status" }, message);
  document.getElementById("toasts").append(el);
  setTimeout(() => el.remove(), kind === "error" ? 8000 : 4000);
}

/** A modal question; resolves true when confirmed. */
export function confirmDialog(title, message, action, danger = true) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "confirm" },
      h("h2", { text: title }), h("p", { text: message }),
      h("div", { class: "toolbar" },
        h("button", { type: "button", class: "cancel", onclick: () => dialog.close("cancel") }, "Cancel"),
        h("button", { type: "button", class: ["confirm-action", danger ? "danger solid" : "primary"],
                      onclick: () => dialog.close("ok") }, action)));
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "ok");
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/** A table: columns as [heading, class] pairs (or headings), rows as arrays of cells. */
export function table(columns, rows, attrs = {}) {
  const head = columns.map((c) => (Array.isArray(c) ? h("th", { class: c[1] }, c[0]) : h("th", {}, c)));
  return h("div", { class: "table-scroll" }, h("table", attrs, h("thead", {}, h("tr", {}, head)), h("tbody", {}, rows)));
}

export const empty = (text) => h("div", { class: "empty" }, text);

/** A figure with its label above it; ``figure`` names it for tests (data-figure). */
export function stat(label, value, { cls = null, figure = null } = {}) {
  return h("div", { class: "stat" }, h("div", { class: "label" }, label),
    h("div", { class: ["value", cls], "data-figure": figure }, value));
}
