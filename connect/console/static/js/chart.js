// Hand-drawn SVG charts of records/s: a sparkline for tables, a chart with a scale for the detail page.
import { rate, s } from "./dom.js";

const COLORS = { in: "#0f5ea8", out: "#1f8a4c" };

/** An SVG path through the values; an unknown value (null: the figure could not be read) leaves a gap. */
function path(values, width, height, top, max) {
  const step = values.length > 1 ? width / (values.length - 1) : width;
  let out = "";
  let pen = "M";
  values.forEach((v, i) => {
    if (v === null || v === undefined) {
      pen = "M";
      return;
    }
    out += `${pen}${(i * step).toFixed(1)},${(top + height - (v / max) * height).toFixed(1)} `;
    pen = "L";
  });
  return out.trim();
}

const known = (values) => values.filter((v) => v !== null && v !== undefined).length >= 2;

/** The area under the last unbroken run of values (a gap ends the shading, not the line). */
function area(values, width, height, top, max) {
  let start = values.length;
  while (start > 0 && values[start - 1] !== null && values[start - 1] !== undefined) start -= 1;
  if (values.length - start < 2) return null;
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const run = values.map((v, i) => (i < start ? null : v));
  return `${path(run, width, height, top, max)} L${((values.length - 1) * step).toFixed(1)},${top + height} ` +
    `L${(start * step).toFixed(1)},${top + height} Z`;
}

/** A small line of the out rate (and the in rate, fainter) over the samples kept. */
export function sparkline(points, width = 120, height = 28) {
  const svg = s("svg", { class: "spark", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
                         "aria-label": "records per second" });
  if (points.length < 2) {
    svg.append(s("line", { x1: 0, x2: width, y1: height - 1, y2: height - 1, stroke: "#dfe4ea" }));
    return svg;
  }
  const max = Math.max(1, ...points.map((p) => Math.max(p.in ?? 0, p.out ?? 0)));
  for (const key of ["out", "in"]) {
    const values = points.map((p) => p[key]);
    if (!known(values)) continue;
    const line = path(values, width, height - 3, 2, max);
    const shade = key === "out" ? area(values, width, height - 3, 2, max) : null;
    if (shade) svg.append(s("path", { d: shade, fill: COLORS.out, "fill-opacity": 0.12 }));
    svg.append(s("path", { d: line, fill: "none", stroke: COLORS[key], "stroke-width": 1.5,
                           "stroke-dasharray": key === "in" ? "3 2" : null, "stroke-linejoin": "round" }));
  }
  return svg;
}

/** In and out rates over time, with a scale on the left and the time span below. */
export function rateChart(points, seconds) {
  const width = 720;
  const height = 180;
  const left = 64;
  const bottom = 22;
  const plotW = width - left - 8;
  const plotH = height - bottom - 10;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`,
                         role: "img", "aria-label": "records per second in and out" });
  const max = niceMax(Math.max(1, ...points.map((p) => Math.max(p.in ?? 0, p.out ?? 0))));
  for (let i = 0; i <= 4; i += 1) {
    const y = 10 + plotH - (i / 4) * plotH;
    svg.append(s("line", { class: "grid-line", x1: left, x2: width - 8, y1: y, y2: y }));
    svg.append(s("text", { x: left - 8, y: y + 4, "text-anchor": "end" }, rate((max * i) / 4)));
  }
  svg.append(s("text", { x: left, y: height - 4 }, `${Math.round(seconds)} s ago`));
  svg.append(s("text", { x: width - 8, y: height - 4, "text-anchor": "end" }, "now"));
  if (points.length >= 2) {
    for (const key of ["out", "in"]) { // "in" dashed on top: equal rates still show both lines
      const values = points.map((p) => p[key]);
      if (!known(values)) continue;
      const g = s("g", { transform: `translate(${left},0)` });
      const line = path(values, plotW, plotH, 10, max);
      const shade = key === "out" ? area(values, plotW, plotH, 10, max) : null;
      if (shade) g.append(s("path", { d: shade, fill: COLORS.out, "fill-opacity": 0.1 }));
      g.append(s("path", { d: line, fill: "none", stroke: COLORS[key], "stroke-width": 2,
                           "stroke-dasharray": key === "in" ? "6 4" : null, "stroke-linejoin": "round" }));
      svg.append(g);
    }
  }
  return svg;
}

function niceMax(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
