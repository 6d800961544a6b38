// What every page is given: polling that stops when the user leaves the page, and an error banner.
import { fill, h } from "./dom.js";

/** How often pages poll the worker. */
export const POLL_MS = 2000;

export class Page {
  constructor(main) {
    this.main = main;
    this.alive = true;
    this.timers = new Set();
    this.alert = h("div", { class: "page-alert" });
  }

  /** Run ``work`` now and then every ``ms`` after it finished (never two at once) while the page is shown. */
  every(ms, work) {
    const run = async () => {
      if (!this.alive) return;
      try {
        await work();
        this.clearError();
      } catch (err) {
        this.error(err);
      }
      if (this.alive) {
        const timer = setTimeout(() => { this.timers.delete(timer); run(); }, ms);
        this.timers.add(timer);
      }
    };
    return run();
  }

  error(err) {
    if (this.alive) fill(this.alert, h("div", { class: "alert", role: "alert" }, err.message || String(err)));
  }

  clearError() {
    this.alert.replaceChildren();
  }

  stop() {
    this.alive = false;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

