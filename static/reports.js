// The Reports page's print button: the browser's own print dialog (and its "Save as PDF").
document.addEventListener("click", function (event) {
  if (event.target.closest("[data-print]")) window.print();
});
