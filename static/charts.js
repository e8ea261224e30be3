// Draw every element that carries a Plotly figure in data-figure, on load and after each htmx swap.
(function () {
  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      var figure = JSON.parse(el.dataset.figure);
      var config = Object.assign({displayModeBar: false, responsive: true}, figure.config || {});
      Plotly.react(el, figure.data, figure.layout, config);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  // After any swap (outerHTML replaces the element the event names), redraw what is on the page.
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
})();
