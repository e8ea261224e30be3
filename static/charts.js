// Draw every element that carries a Plotly figure in data-figure, on load and after each htmx swap.
(function () {
  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      var figure = JSON.parse(el.dataset.figure);
      var config = Object.assign({displayModeBar: false, responsive: true}, figure.config || {});
      Plotly.react(el, figure.data, figure.layout, config);
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
})();
