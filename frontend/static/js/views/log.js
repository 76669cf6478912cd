// A short log of the events a student should notice: faults, CRC checks, allocation failures, numerics.

import { us } from "../format.js";
import { num } from "../store.js";

const MAX_LINES = 60;

function line(e) {
  switch (e.kind) {
    case "fault":
      return [`${e.fault} ${e.action}: ${e.detail}`, "bad"];
    case "crc":
      return e.bad_banks.length
        ? [`CRC check (${e.source}): ${e.bad_banks.length} of ${e.checked_banks} banks bad: ${e.bad_banks.join(", ")}`, "bad"]
        : [`CRC check (${e.source}): all ${e.checked_banks} banks clean`, "ok"];
    case "alloc_fail":
      return [`allocation failed for ${e.owner}: wanted ${e.pages_wanted} pages, ${e.free_pages} free, largest run ${e.largest_free_run} (${e.reason})`, "bad"];
    case "numerics": {
      const err = num(e.rel_error);
      const bad = !Number.isFinite(err) || e.nan_count > 0 || err > 1e-2;
      return [`numerics (${e.scaled_model}, scaled): rel. error ${Number.isFinite(err) ? err.toExponential(2) : err}, NaN ${e.nan_count}, Inf ${e.inf_count}`, bad ? "bad" : "ok"];
    }
    default:
      return [e.kind, ""];
  }
}

export class LogView {
  constructor(el, store) {
    this.el = el;
    this.store = store;
    this.drawn = "";
  }

  render() {
    const stamp = this.store.stamp(["log", "reset"]);
    if (stamp === this.drawn) return false;
    this.drawn = stamp;
    const items = this.store.log.slice(-MAX_LINES).reverse();
    if (!items.length) { // an empty panel says what would appear in it, rather than nothing
      const hint = document.createElement("p");
      hint.className = "hint";
      hint.dataset.testid = "log-empty";
      hint.textContent = "No fault, CRC check, allocation failure or numerics event up to the cursor.";
      this.el.replaceChildren(hint);
      return true;
    }
    this.el.replaceChildren(
      ...items.map((e) => {
        const [text, cls] = line(e);
        const div = document.createElement("div");
        div.className = `log-line ${cls}`;
        div.textContent = `${us(e.t_us)}  ${text}`;
        return div;
      }),
    );
    return true;
  }
}
