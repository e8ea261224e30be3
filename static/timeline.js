// The runs timeline: open a run when its bar is clicked; wired after charts.js has drawn (on load and after each swap).
(function () {
  function wire() {
    document.querySelectorAll("[data-run-links]").forEach(function (el) {
      if (el.dataset.wired || typeof el.on !== "function") return;
      el.dataset.wired = "1";
      el.on("plotly_click", function (data) {
        var point = data.points && data.points[0];
        if (point && point.customdata) window.location = el.dataset.runLinks + point.customdata[0];
      });
    });
  }
  window.addEventListener("load", wire);
  document.addEventListener("htmx:afterSettle", function () { setTimeout(wire, 0); });
})();
