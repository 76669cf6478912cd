// One tooltip for the page (request lanes, the bank map): a positioned <div role="tooltip"> that follows the
// pointer, so a hover reads anywhere on a bar or a cell (Plotly's own hover only finds a line's end points) and
// shows at once (a title attribute waits a second and is not drawn in screenshots).

let el = null;

function tip() {
  if (!el) {
    el = document.createElement("div");
    el.id = "page-tip";
    el.className = "page-tip hidden";
    el.setAttribute("role", "tooltip");
    el.dataset.testid = "page-tip";
    el.setAttribute("data-testid", "page-tip");
    document.body.append(el);
  }
  return el;
}

// html: trusted markup built by the views (every value in it escaped or numeric); x, y: client px of the pointer
export function showTip(html, x, y) {
  const t = tip();
  if (t.innerHTML !== html) t.innerHTML = html;
  t.classList.remove("hidden");
  const w = t.offsetWidth;
  const h = t.offsetHeight;
  const left = x + 14 + w > window.innerWidth ? Math.max(4, x - w - 14) : x + 14;
  const top = y + 14 + h > window.innerHeight ? Math.max(4, y - h - 14) : y + 14;
  t.style.transform = `translate(${Math.round(left + window.scrollX)}px, ${Math.round(top + window.scrollY)}px)`;
}

export function hideTip() {
  if (el) el.classList.add("hidden");
}
