// Paper figures (paper_figure.html) and the plot view (plots.html): draws the figure specs the
// server built (results/figures.py and the CLI's own figure functions) as they are; a spec with
// no data shows a "no data" note in its place.
(function () {
  "use strict";
  const el = document.getElementById("figure-data");
  if (!el || typeof Plotly === "undefined") return;
  const hasData = data => data.some(t => ["x", "y", "z"].some(k => Array.isArray(t[k]) && t[k].length > 0));
  JSON.parse(el.textContent).forEach(([name, spec]) => {
    const div = document.getElementById("figure-" + name);
    if (!div) return;
    if (!hasData(spec.data || [])) {
      const note = document.createElement("p");
      note.className = "no-data-note";
      note.textContent = "no data to draw";
      div.classList.add("no-data");
      div.replaceChildren(note);
      return;
    }
    Plotly.newPlot(div, spec.data, spec.layout, {displaylogo: false, responsive: true});
  });
})();
