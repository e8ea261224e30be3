// Draw every element that carries a Plotly figure in data-figure, on load, after each htmx swap and when the theme
// or the times' zone changes.
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

  // The server writes UTC. With Local time on (<html data-times="local">) a chart's times read in the browser's zone,
  // as the page's <time> elements do: the Overview's failures spike sat five hours from the dead letters listed
  // beside it (helper 139). Only full moments convert; a day ("2026-12-01") stays the day it names, and a figure
  // marked "utc" (Reports': UTC hours and days, as their headings and tables say) stays as written.
  var MOMENT = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)$/;

  function localMoment(value) {
    return typeof value === "string" && MOMENT.test(value) ? window.reboundLocalMoment(new Date(value)) : value;
  }

  function inZone(traces) {
    if (document.documentElement.getAttribute("data-times") !== "local") return traces;
    return traces.map(function (trace) {
      return Array.isArray(trace.x) ? Object.assign({}, trace, {x: trace.x.map(localMoment)}) : trace;
    });
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
      Plotly.react(el, figure.utc ? figure.data : inZone(figure.data), themed(figure.layout || {}), config);
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
  // After any swap (outerHTML replaces the element the event names), redraw what is on the page: in a task of its
  // own, so the keyboard's place is given back (console.js) before Plotly's drawing holds the page.
  var pending = false;
  document.addEventListener("htmx:afterSettle", function () {
    if (pending) return;
    pending = true;
    window.setTimeout(function () { pending = false; draw(document); }, 0);
  });
  document.addEventListener("rebound:theme", function () { draw(document); });
  document.addEventListener("rebound:times", function () { draw(document); });
})();
