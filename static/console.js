// Every page's own behaviour: the narrow-screen menu, the account dropdown, the theme and local-time toggles. No inline script, so the
// Content-Security-Policy needs no unsafe-inline; the server renders <html data-theme data-times> from the cookies
// set here, so a reload shows the chosen theme at once.
(function () {
  var root = document.documentElement;
  var YEAR_S = 365 * 24 * 3600;
  var systemDark = window.matchMedia("(prefers-color-scheme: dark)");

  function remember(name, value) {
    // A cookie, not localStorage, because the server reads it to render the first paint right.
    document.cookie = name + "=" + (value || "") + "; path=/; SameSite=Lax; max-age=" + (value ? YEAR_S : 0);
  }

  function pressed(pref, on) {
    document.querySelectorAll('[data-pref="' + pref + '"]').forEach(function (button) {
      button.setAttribute("aria-pressed", on ? "true" : "false");
    });
  }

  // -- theme: follows the system until a person picks the other one --
  function isDark() {
    var chosen = root.getAttribute("data-theme");
    return chosen ? chosen === "dark" : systemDark.matches;
  }

  function themeChanged() {
    pressed("theme", isDark());
    document.dispatchEvent(new CustomEvent("rebound:theme", {detail: {dark: isDark()}}));
  }

  function toggleTheme() {
    var wanted = isDark() ? "light" : "dark";
    // Choosing what the system already shows means following the system again.
    if (wanted === (systemDark.matches ? "dark" : "light")) {
      root.removeAttribute("data-theme");
      remember("rebound_theme", null);
    } else {
      root.setAttribute("data-theme", wanted);
      remember("rebound_theme", wanted);
    }
    themeChanged();
  }

  // -- times: the server writes UTC into <time datetime>; local time is rewritten here --
  var ABSOLUTE = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2})(:\d{2})?(\.\d{3})?( UTC)?$/;
  var CLOCK = /^\d{2}:\d{2}(:\d{2})?$/;

  function pad(n, width) { return String(n).padStart(width || 2, "0"); }

  function zoneName(when) {
    var part = new Intl.DateTimeFormat([], {timeZoneName: "short"}).formatToParts(when)
      .find(function (p) { return p.type === "timeZoneName"; });
    return part ? part.value : "";
  }

  function localText(when, utcText) {
    var m = ABSOLUTE.exec(utcText);
    var seconds = m ? m[3] : utcText.length > 5;
    var clock = pad(when.getHours()) + ":" + pad(when.getMinutes()) + (seconds ? ":" + pad(when.getSeconds()) : "");
    if (!m) return clock;
    if (m[4]) clock += "." + pad(when.getMilliseconds(), 3);
    var date = when.getFullYear() + "-" + pad(when.getMonth() + 1) + "-" + pad(when.getDate());
    return date + " " + clock + (m[5] ? " " + zoneName(when) : "");
  }

  function showTimes(scope) {
    var local = root.getAttribute("data-times") === "local";
    scope.querySelectorAll(".tz").forEach(function (el) {
      el.textContent = local ? zoneName(new Date()) : "UTC";
    });
    scope.querySelectorAll("time[datetime]").forEach(function (el) {
      if (!("utcText" in el.dataset)) {
        el.dataset.utcText = el.textContent;
        el.dataset.utcTitle = el.getAttribute("title") || "";
      }
      var when = new Date(el.getAttribute("datetime"));
      if (!local || isNaN(when)) {
        el.textContent = el.dataset.utcText;
        el.setAttribute("title", el.dataset.utcTitle);
        return;
      }
      var text = el.dataset.utcText.trim();
      // Only UTC clock readings change; "3 min ago" and a task's own zone stay as written.
      if (ABSOLUTE.test(text) || CLOCK.test(text)) el.textContent = localText(when, text);
      el.setAttribute("title", when.toLocaleString([], {dateStyle: "medium", timeStyle: "long"}) +
        " · " + when.toISOString().replace(".000Z", "Z"));
    });
  }

  function toggleTimes() {
    var local = root.getAttribute("data-times") !== "local";
    root.setAttribute("data-times", local ? "local" : "utc");
    remember("rebound_times", local ? "local" : null);
    pressed("times", local);
    showTimes(document);
  }

  // -- the narrow-screen menu and the account dropdown: a button that shows the element it controls --
  function setOpen(button, open) {
    button.setAttribute("aria-expanded", open ? "true" : "false");
  }

  function closeAll(except) {
    document.querySelectorAll('.menu-toggle[aria-expanded="true"], .account-toggle[aria-expanded="true"]')
      .forEach(function (button) { if (button !== except) setOpen(button, false); });
  }

  document.addEventListener("click", function (event) {
    var target = event.target.closest("[data-pref], .menu-toggle, .account-toggle");
    if (target && target.dataset.pref === "theme") toggleTheme();
    else if (target && target.dataset.pref === "times") toggleTimes();
    else if (target) setOpen(target, target.getAttribute("aria-expanded") !== "true");
    // A click elsewhere closes the account dropdown, as any menu does.
    if (!event.target.closest(".who")) {
      document.querySelectorAll('.account-toggle[aria-expanded="true"]').forEach(function (b) { setOpen(b, false); });
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var open = document.querySelector('.account-toggle[aria-expanded="true"], .menu-toggle[aria-expanded="true"]');
    if (open) { closeAll(); open.focus(); }
  });

  systemDark.addEventListener("change", themeChanged);
  document.addEventListener("DOMContentLoaded", function () {
    pressed("theme", isDark());
    showTimes(document);
  });
  // Live regions and fragments arrive in UTC: show them the way the rest of the page is shown.
  document.addEventListener("htmx:load", function (event) { showTimes(event.target); });
})();
