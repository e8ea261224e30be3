// The console's small behaviours, wired by data- attributes: the Content-Security-Policy allows no inline script.
(function () {
  // A form (or the button that submits it) with data-confirm asks first.
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var question = (button && button.dataset.confirm) || event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    var dismiss = event.target.closest("[data-dismiss]");
    if (dismiss) dismiss.closest(dismiss.dataset.dismiss).remove();
    var collapse = event.target.closest("[data-collapse]");
    if (collapse) {
      var toggle = document.getElementById(collapse.dataset.collapse);
      if (toggle) toggle.click();
    }
  });

  // An expanded DLQ group's toggle folds it instead of fetching it again. Capture phase: before htmx's own click.
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-fold]");
    if (!toggle || toggle.getAttribute("aria-expanded") !== "true") return;
    var region = document.getElementById(toggle.dataset.fold);
    region.hidden = true;
    region.replaceChildren();
    toggle.setAttribute("aria-expanded", "false");
    event.stopImmediatePropagation();
  }, true);
  document.addEventListener("htmx:afterRequest", function (event) {
    var toggle = event.detail.elt;
    if (toggle.dataset && toggle.dataset.fold && event.detail.successful) toggle.setAttribute("aria-expanded", "true");
  });

  // A "select all" box ticks every box its data-check-all selector names.
  document.addEventListener("change", function (event) {
    var all = event.target.closest("[data-check-all]");
    if (all) document.querySelectorAll(all.dataset.checkAll).forEach(function (box) { box.checked = all.checked; });
    var auto = event.target.closest("[data-autosubmit]");
    if (auto) auto.form.requestSubmit();
  });

  // A filter form with data-drop-params leaves empty fields (and the defaults it lists) out of the URL.
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (!form.dataset || form.dataset.dropParams === undefined) return;
    var defaults = form.dataset.dropParams ? JSON.parse(form.dataset.dropParams) : {};
    var parameters = event.detail.parameters;
    Object.keys(parameters).forEach(function (name) {
      if (parameters[name] === "" || defaults[name] === parameters[name]) delete parameters[name];
    });
  });
})();
