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
    Plotly.react("chart-queue", traces("queue_pkts", "t", nameOf, {line: {shape: "hv"}}),
      layout("queue"), opts);
    Plotly.react("chart-throughput", traces("throughput_mbps", "t", nameOf), layout("throughput"), opts);
    // Each point's two classes side by side in the legend, "other" hatched in the point's colour.
    const high = traces("drops_high", "t", p => nameOf(p) + " high priority (AF11)", {type: "bar"});
    const low = traces("drops_low", "t", p => nameOf(p) + " other", {type: "bar", marker: {pattern: {shape: "/"}}});
    const drops = [].concat(...high.map((t, i) => [t, low[i]]));
    Plotly.react("chart-drops", drops, layout("drops"), opts);
    Plotly.react("chart-pages", traces("pages_done", "progress_t", nameOf, {line: {shape: "hv"}}),
      layout("pages"), opts);
  }

  function drawFigures() {
    // The distribution chart's CDF / CCDF (log) buttons are part of its spec.
    if (typeof Plotly === "undefined" || !cfg.figures || !cfg.figures.bars) return;
    Plotly.newPlot("chart-bars", cfg.figures.bars.data, cfg.figures.bars.layout, opts);
    Plotly.newPlot("chart-cdf", cfg.figures.cdf.data, cfg.figures.cdf.layout, opts);
  }

  function drawApps() {
    // Per point with samples: the server's specs, a CCDF per app and metric, goodput per flow.
    const el = document.getElementById("apps-data");
    if (typeof Plotly === "undefined" || !el) return;
    Object.entries(JSON.parse(el.textContent)).forEach(([point, a]) => {
      a.ccdf.forEach((f, i) => Plotly.newPlot(`apps-ccdf-${point}-${i}`, f.data, f.layout, opts));
      a.goodput.forEach((f, i) => Plotly.newPlot(`apps-goodput-${point}-${i}`, f.data, f.layout, opts));
    });
  }

  function drawNewcwv() {
    // The newCWV reports computed by the server (results/figures.py): gain heat maps, trace, FTP throughput.
    const el = document.getElementById("newcwv-data");
    if (typeof Plotly === "undefined" || !el) return;
    const d = JSON.parse(el.textContent);
    d.gain.forEach((f, i) => Plotly.newPlot(`newcwv-gain-${i}`, f.data, f.layout, opts));
    d.trace.forEach((f, i) => Plotly.newPlot(`newcwv-trace-${i}`, f.data, f.layout, opts));
    if (d.ftp) Plotly.newPlot("newcwv-ftp", d.ftp.data, d.ftp.layout, opts);
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
