// Draw every element that carries a Plotly figure in data-figure, on load, after each htmx swap and when the theme
// changes.
(function () {
  // The figures come from the server with a white ground and dark ink; the page's theme decides instead: a clear
  // ground over the panel, the page's own text colour, grid lines that read on either ground.
  function themed(layout) {
    var ink = getComputedStyle(document.body).color;
    var out = Object.assign({}, layout, {paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)"});
    out.font = Object.assign({}, layout.font || {}, {color: ink});
    Object.keys(out).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        out[key] = Object.assign({}, out[key], {gridcolor: "rgba(128,138,160,.22)", linecolor: "rgba(128,138,160,.5)",
                                               zerolinecolor: "rgba(128,138,160,.4)"});
      }
    });
    return out;
  }

  // The charts drawn so far. A live region swapped out (the Overview's every 5 s) took its chart off the page, but
  // Plotly's window resize handler kept it and all its SVG: a tab left open grew by ~1.5 MB a minute (helper 131).
  var drawn = [];

  function purgeDetached() {
    drawn = drawn.filter(function (el) {
      if (el.isConnected) return true;
      Plotly.purge(el);
      return false;
    });
  }

  function draw(root) {
    if (!window.Plotly) return;
    purgeDetached();
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      if (drawn.indexOf(el) < 0) drawn.push(el);
      var figure = JSON.parse(el.dataset.figure);
      var config = Object.assign({displayModeBar: false, responsive: true}, figure.config || {});
      Plotly.react(el, figure.data, themed(figure.layout || {}), config);
      // A point whose customdata is a link opens what lies behind it (the Reports page's charts).
      if (!el.dataset.linked) {
        el.dataset.linked = "1";
        el.on("plotly_click", function (event) {
          var link = event.points && event.points[0] && event.points[0].customdata;
          if (typeof link === "string" && link.charAt(0) === "/") window.location.assign(link);
        });
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  // After any swap (outerHTML replaces the element the event names), redraw what is on the page.
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
  document.addEventListener("rebound:theme", function () { draw(document); });
})();
