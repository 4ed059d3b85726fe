// Run page: draws the figure specs computed by the server (results/figures.py: the report's bars
// and page-time distribution, the applications' CCDF and goodput charts, the newCWV charts) as
// they are, and follows a live run over server-sent events. The live charts take their layouts
// from the server too (figures.bottleneck_charts); only their data is filled in here as it
// streams, with a point's colour from the server (bottleneck_series' `color`, figures.color) and
// its name "N: label" as figures.point_name gives it.
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("run-data").textContent);
  const series = {};  // point -> {t, queue_pkts, throughput_mbps, drops_high, drops_low, progress_t, pages_done, color}
  const labels = {};  // point -> its sweep label, as the progress table shows it
  const KEYS = ["t", "queue_pkts", "throughput_mbps", "drops_high", "drops_low", "progress_t", "pages_done"];
  const layout = key => JSON.parse(JSON.stringify(cfg.liveLayouts[key]));  // a copy: Plotly keeps state in it
  const opts = {displaylogo: false, responsive: true};
  // Plotly reads a few HTML tags in names and titles: show app, metric, tag and sweep names as written.
  const esc = s => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const nameOf = p => esc(p + ": " + (labels[p] === undefined ? "" : labels[p]));
  (cfg.points || []).forEach(p => { labels[p.point] = p.label; });
  const dropClasses = cfg.dropClasses || {};  // point -> {high: "AF11" or null, rest: the other classes counted}

  // A chart with nothing to draw shows a "no data" note in its place, not blank axes.
  const hasData = data => data.some(t => ["x", "y", "z"].some(k => Array.isArray(t[k]) && t[k].length > 0));
  const titleOf = layout => (layout && layout.title && (layout.title.text || layout.title)) || "";
  function plot(id, data, layout, why) {
    const el = typeof id === "string" ? document.getElementById(id) : id;
    if (!el) return;
    if (!hasData(data)) {
      Plotly.purge(el);
      el.classList.add("no-data");
      const note = document.createElement("p");
      note.className = "no-data-note";
      // The title as text (a name with markup stays text), then the reason.
      const tmp = document.createElement("span"); tmp.innerHTML = String(titleOf(layout));
      note.textContent = (tmp.textContent ? tmp.textContent + ": " : "") + "no data" + (why ? " (" + why + ")" : "");
      el.replaceChildren(note);
      return;
    }
    if (el.classList.contains("no-data")) { el.classList.remove("no-data"); el.replaceChildren(); }
    Plotly.react(el, data, layout, opts);
  }

  function merge(point, s, reset) {
    if (reset || !series[point]) { series[point] = {color: (series[point] || {}).color}; KEYS.forEach(k => series[point][k] = []); }
    KEYS.forEach(k => { if (s[k]) series[point][k].push(...s[k]); });
    if (s.color) series[point].color = s.color;
  }

  function traces(field, x, name, extra) {
    // A point without rows yet has no colour and nothing to draw.
    return Object.keys(series).filter(p => series[p].color).map(p => {
      const t = Object.assign({type: "scatter", mode: "lines", name: name(p), x: series[p][x], y: series[p][field]},
        extra || {});
      if (t.type === "bar") t.marker = Object.assign({color: series[p].color}, t.marker || {});
      else t.line = Object.assign({color: series[p].color}, t.line || {});
      return t;
    });
  }

  function draw() {
    if (typeof Plotly === "undefined") return;
    const why = cfg.live ? "waiting for the first samples" : "no bottleneck samples were recorded for this run";
    plot("chart-queue", traces("queue_pkts", "t", nameOf, {line: {shape: "hv"}}), layout("queue"), why);
    plot("chart-throughput", traces("throughput_mbps", "t", nameOf), layout("throughput"), why);
    // Each point's two series side by side in the legend, the second hatched in the point's colour,
    // each named by the DSCP classes it counted (the server's dropClasses once a point has its final
    // counters); a point at which no AF11 packet arrived has no AF11 series.
    const named = (p, which) => {
      const c = dropClasses[p];
      if (!c) return nameOf(p) + (which === "high" ? " AF11" : " not AF11");
      return c[which] === null ? null : nameOf(p) + " " + esc(c[which]);
    };
    const pts = Object.keys(series).filter(p => series[p].color);
    const high = traces("drops_high", "t", p => named(p, "high"), {type: "bar"});
    const low = traces("drops_low", "t", p => named(p, "rest"), {type: "bar", marker: {pattern: {shape: "/"}}});
    const drops = [].concat(...pts.map((p, i) => [high[i], low[i]])).filter(t => t.name !== null);
    plot("chart-drops", drops, layout("drops"), why);
    plot("chart-pages", traces("pages_done", "progress_t", nameOf, {line: {shape: "hv"}}), layout("pages"),
      cfg.live ? "waiting for the first progress" : "no progress rows were recorded for this run");
  }

  function drawFigures() {
    // The distribution chart's CDF / CCDF (log) buttons are part of its spec.
    if (typeof Plotly === "undefined" || !cfg.figures || !cfg.figures.bars) return;
    plot("chart-bars", cfg.figures.bars.data, cfg.figures.bars.layout, "no page completed");
    plot("chart-cdf", cfg.figures.cdf.data, cfg.figures.cdf.layout, "no page completed");
  }

  function drawApps() {
    // Per point with samples: the server's specs, a CCDF per app and metric, goodput per flow.
    const el = document.getElementById("apps-data");
    if (typeof Plotly === "undefined" || !el) return;
    Object.entries(JSON.parse(el.textContent)).forEach(([point, a]) => {
      a.ccdf.forEach((f, i) => plot(`apps-ccdf-${point}-${i}`, f.data, f.layout, "every sample failed"));
      a.goodput.forEach((f, i) => plot(`apps-goodput-${point}-${i}`, f.data, f.layout, "no goodput samples"));
    });
  }

  function drawNewcwv() {
    // The newCWV reports computed by the server (results/figures.py): gain heat maps, trace, FTP throughput.
    const el = document.getElementById("newcwv-data");
    if (typeof Plotly === "undefined" || !el) return;
    const d = JSON.parse(el.textContent);
    d.gain.forEach((f, i) => plot(`newcwv-gain-${i}`, f.data, f.layout));
    d.trace.forEach((f, i) => plot(`newcwv-trace-${i}`, f.data, f.layout));
    if (d.ftp) plot("newcwv-ftp", d.ftp.data, d.ftp.layout);
  }

  function showProgress(points) {
    const table = document.getElementById("progress-table");
    points.forEach(p => {
      let row = table.querySelector(`tr[data-point="${p.point}"]`);
      if (!row) {
        const empty = table.querySelector("tr.empty"); if (empty) empty.remove();
        row = table.insertRow(-1); row.dataset.point = p.point;
        ["", "p-status", "p-phase", "p-pages", "", "p-elapsed", "p-eta"].forEach(c => { row.insertCell(-1).className = c; });
        row.cells[0].textContent = p.point + ": " + p.label;
        row.cells[4].innerHTML = '<progress class="p-bar"></progress>';
      }
      row.querySelector(".p-status").textContent = p.status;
      row.querySelector(".p-phase").textContent = p.phase;
      row.querySelector(".p-pages").textContent = p.pages_done + " / " + p.pages_total;
      const bar = row.querySelector(".p-bar"); bar.max = p.pages_total || 1; bar.value = p.pages_done;
      row.querySelector(".p-elapsed").textContent = p.elapsed + " s";
      row.querySelector(".p-eta").textContent = p.eta === null ? "-" : p.eta + " s";
    });
  }

  Object.entries(cfg.series || {}).forEach(([p, s]) => merge(p, s, true));
  draw();
  drawFigures();
  drawApps();
  drawNewcwv();
  if (cfg.live && window.EventSource) {
    const es = new EventSource(cfg.events);
    es.addEventListener("update", ev => {
      const msg = JSON.parse(ev.data);
      const status = document.getElementById("run-status");
      status.textContent = msg.status; status.className = "state-" + msg.status;
      if (msg.job && msg.job.message) {
        let m = document.getElementById("job-message");
        if (!m) { m = document.createElement("span"); m.id = "job-message"; status.after(" ", m); }
        m.textContent = msg.job.message;
      }
      msg.points.forEach(p => { labels[p.point] = p.label; });
      Object.entries(msg.series).forEach(([p, s]) => merge(p, s, msg.reset));
      showProgress(msg.points);
      draw();
    });
    // The run is over: reload once to show the report.
    es.addEventListener("end", () => { es.close(); window.location.reload(); });
  }
})();
