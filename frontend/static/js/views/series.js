// Small helpers for time series drawn on the shared axis.

// A line breaks where the series has a gap (a pause with no samples, e.g. between prefill and decode, or
// across a broken-axis one-off cost): a null goes between two points further apart than `factor` times the
// median spacing, and Plotly (connectgaps: false) leaves the line open there instead of drawing a diagonal.
export function gapped(x, y, factor = 6) {
  if (x.length < 3) return [x, y];
  const d = [];
  for (let i = 1; i < x.length; i++) d.push(x[i] - x[i - 1]);
  const med = [...d].sort((a, b) => a - b)[d.length >> 1] || 0;
  if (!(med > 0)) return [x, y];
  const gx = [x[0]];
  const gy = [y[0]];
  for (let i = 1; i < x.length; i++) {
    if (x[i] - x[i - 1] > factor * med) {
      gx.push(null);
      gy.push(null);
    }
    gx.push(x[i]);
    gy.push(y[i]);
  }
  return [gx, gy];
}

// A legend under a plot (never over its data): line swatches drawn as small SVGs, [{color, dash, text, title}].
const DASH = { solid: "", dot: "2 3", dash: "6 3", dashdot: "6 3 2 3" };
export function htmlLegend(el, items) {
  if (!el) return;
  el.replaceChildren(
    ...items.map((it) => {
      const span = document.createElement("span");
      span.className = "key";
      if (it.title) span.title = it.title;
      span.innerHTML = `<svg width="22" height="10" aria-hidden="true"><line x1="1" y1="5" x2="21" y2="5" stroke="${it.color}" stroke-width="2.2" stroke-dasharray="${DASH[it.dash || "solid"]}"/></svg>`;
      span.append(document.createTextNode(` ${it.text}`));
      return span;
    }),
  );
}
