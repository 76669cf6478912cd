// Checks run inside the page by test_story.py: ({name: () => result}) evaluated as one expression.
({
  // every visible text element whose colour is below WCAG AA (4.5:1) against its effective background
  textContrast: () => {
    const lum = (c) => {
      const [r, g, b] = c.match(/[\d.]+/g).map(Number).slice(0, 3).map((v) => {
        v /= 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const bg = (n) => {
      for (; n; n = n.parentElement) {
        const c = getComputedStyle(n).backgroundColor;
        const m = c.match(/[\d.]+/g);
        if (m && (m.length < 4 || Number(m[3]) > 0.5)) return c;
      }
      return "rgb(0,0,0)";
    };
    const sel = [".panel h2", ".panel h2 .sub", ".legend .key", ".tour-body p", ".tour-body h3", ".claims td", ".claims th",
      ".hint", ".story-line", ".delta-line", ".log-line", ".bar button", ".bar select", ".clock", ".status", ".detail"].join(", ");
    const bad = [];
    for (const n of document.querySelectorAll(sel)) {
      if (!n.offsetParent || !n.textContent.trim()) continue;
      const a = lum(getComputedStyle(n).color);
      const b = lum(bg(n));
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      if (ratio < 4.5) bad.push(`${n.className || n.tagName}: ${ratio.toFixed(2)} "${n.textContent.trim().slice(0, 30)}"`);
    }
    return bad;
  },

  // pairs of bank cell states that differ by less than 1.5:1 in luminance AND less than 30 degrees in hue
  cellStates: () => {
    const hex = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16) / 255);
    const lin = (v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    const lum = (h) => hex(h).map(lin).reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
    const hue = (h) => {
      const [r, g, b] = hex(h);
      const mx = Math.max(r, g, b);
      const d = mx - Math.min(r, g, b);
      if (!d) return null;
      const x = mx === r ? ((g - b) / d) % 6 : mx === g ? (b - r) / d + 2 : (r - g) / d + 4;
      return (x * 60 + 360) % 360;
    };
    const pal = window.__layerscope.palette;
    const cols = { ...pal.cell, prefill: pal.phase.prefill, decode: pal.phase.decode };
    delete cols.crc_bad; // the CRC strip is its own column, not a cell state
    delete cols.crc_ok;
    const keys = Object.keys(cols);
    const out = [];
    for (let i = 0; i < keys.length; i++) {
      for (let j = i + 1; j < keys.length; j++) {
        const [a, b] = [cols[keys[i]], cols[keys[j]]];
        if (a === b) continue;
        const cr = (Math.max(lum(a), lum(b)) + 0.05) / (Math.min(lum(a), lum(b)) + 0.05);
        const [ha, hb] = [hue(a), hue(b)];
        const dh = ha === null || hb === null ? (ha === hb ? 0 : 180) : Math.min(Math.abs(ha - hb), 360 - Math.abs(ha - hb));
        if (cr < 1.5 && dh < 30) out.push(`${keys[i]}/${keys[j]}`);
      }
    }
    return out;
  },

  // canvas pixels of the bank map with exactly the evicted cells' colour
  evictedPixels: () => {
    const c = document.getElementById("banks-canvas");
    const want = window.__layerscope.palette.cell.evicted;
    const [r, g, b] = [1, 3, 5].map((i) => parseInt(want.slice(i, i + 2), 16));
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] === r && d[i + 1] === g && d[i + 2] === b) n++;
    return n;
  },

  // points drawn by a plot's traces (nulls are line breaks)
  points: (id) => document.getElementById(id).data.reduce((n, t) => n + (t.x || []).filter((v) => v !== null).length, 0),

  // the bar traces of the timeline (kernel launches, not labels or boundaries)
  bars: () => document.getElementById("timeline-plot").data.filter((t) => t.mode === "lines" && !t.meta),
})
