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

  // A chart's times are written as the page's (static/charts.js reads them through this).
  window.reboundLocalMoment = function (when) { return localText(when, "1970-01-01 00:00:00"); };

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
    document.dispatchEvent(new CustomEvent("rebound:times", {detail: {local: local}}));  // charts.js redraws
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
    if (open) { closeAll(); open.focus(); return; }
    // A popover form (a row's Discard…, a run's Compensate…) closes as a menu does, back on its button.
    var popover = event.target.closest && event.target.closest("details[data-popover][open]");
    if (popover) { popover.open = false; popover.querySelector("summary").focus(); }
  });

  // A popover form opened (a row's Discard…) puts the keyboard in its first field: focus stayed on the summary, a
  // Tab away from the box it asks for. "toggle" does not bubble: listened for on the way down.
  document.addEventListener("toggle", function (event) {
    var popover = event.target;
    if (!popover.matches || !popover.matches("details[data-popover]") || !popover.open) return;
    var field = popover.querySelector("input:not([type=hidden]), textarea, select");
    if (field) field.focus();
  }, true);

  // Tabbing out of the account dropdown closes it: left open, it covered the banner below it. A popover form (a row's
  // Discard…) likewise: left open, it covered the next row's buttons (helper 168).
  document.addEventListener("focusout", function (event) {
    var who = event.target.closest && event.target.closest(".who");
    if (who && event.relatedTarget && !who.contains(event.relatedTarget)) {
      who.querySelectorAll('.account-toggle[aria-expanded="true"]').forEach(function (b) { setOpen(b, false); });
    }
    var popover = event.target.closest && event.target.closest("details[data-popover][open]");
    if (popover && event.relatedTarget && !popover.contains(event.relatedTarget)) popover.open = false;
  });

  systemDark.addEventListener("change", themeChanged);
  document.addEventListener("DOMContentLoaded", function () {
    pressed("theme", isDark());
    showTimes(document);
  });
  // Live regions and fragments arrive in UTC: show them the way the rest of the page is shown.
  document.addEventListener("htmx:load", function (event) { showTimes(event.target); });
})();

// The console's small behaviours, wired by data- attributes: the Content-Security-Policy allows no inline script.
(function () {
  // A form (or the button that submits it) with data-confirm asks first.
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    if (event.target.dataset.sending) {
      // Sent already: a second press neither asks again nor sends (a double click asked "Run … for real?" twice).
      event.preventDefault();
      return;
    }
    var question = (button && button.dataset.confirm) || event.target.dataset.confirm;
    if (question && !window.confirm(question)) {
      event.preventDefault();
      return;
    }
    // A second press while the first one's page is on its way would do the work twice (two runs of "Run now"):
    // a plain POST form sends once per page. htmx's own forms (default prevented) drop a second request already;
    // 15 s frees a form whose answer did not replace the page (a download, a dropped connection).
    var form = event.target;
    if (event.defaultPrevented || form.method !== "post") return;
    form.dataset.sending = "1";
    setTimeout(function () { delete form.dataset.sending; }, 15000);
  });
  // A page shown again from the back-forward cache is a new visit: its forms may be sent again.
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) {
      // Loaded anew by Back or a reload: the browser put back what the filter boxes held before, over what the
      // server drew for this address; the boxes then named acme above every tenant's figures (helper 166). A page
      // from the back-forward cache is left as it was (its boxes and rows are the same moment's), and one reached
      // by a link keeps what a person typed while it loaded.
      var visit = (performance.getEntriesByType("navigation")[0] || {}).type;
      if (visit === "back_forward" || visit === "reload") {
        document.querySelectorAll("form[method=get]").forEach(function (form) { form.reset(); });
      }
      return;
    }
    document.querySelectorAll("form[data-sending]").forEach(function (form) { delete form.dataset.sending; });
  });

  document.addEventListener("click", function (event) {
    var dismiss = event.target.closest("[data-dismiss]");
    if (dismiss) {
      // Focus goes on to what followed the dismissed panel, not to <body> (the next Tab landed at the page's top).
      var gone = dismiss.closest(dismiss.dataset.dismiss), hadFocus = gone.contains(document.activeElement);
      var next = Array.prototype.find.call(document.querySelectorAll("a[href], button, input, select, textarea"),
        function (e) { return !gone.contains(e) && (gone.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING); });
      gone.remove();
      if (hadFocus && next) next.focus();
    }
    var collapse = event.target.closest("[data-collapse]");
    if (collapse) {
      // Hide folds the group and gives focus to its toggle: the Hide button went with the entries, focus to <body>.
      var toggle = document.getElementById(collapse.dataset.collapse);
      if (toggle) { toggle.click(); toggle.focus(); }
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
    // The address says which group is open (a shared link, Back): folding goes back to the one without it. Both
    // entries marked as htmx marks its own, so Back to either loads it (htmx keeps no history cache here).
    if (toggle.dataset.closedUrl) {
      history.replaceState({htmx: true}, document.title, location.href);
      history.pushState({htmx: true}, document.title, toggle.dataset.closedUrl);
    }
    event.stopImmediatePropagation();
  }, true);
  document.addEventListener("htmx:afterRequest", function (event) {
    var toggle = event.detail.elt;
    if (toggle.dataset && toggle.dataset.fold && event.detail.successful) toggle.setAttribute("aria-expanded", "true");
  });
  // A swapped-in toggle (a group's header reading its count again after a Replay in it) says what is shown: its
  // header came from the page's first address and said "collapsed" over the open entries, so a press fetched them
  // again instead of folding them.
  document.addEventListener("htmx:afterSettle", function (event) {
    var scope = event.detail.elt && event.detail.elt.isConnected ? event.detail.elt : document;
    scope.querySelectorAll("[data-fold]").forEach(function (toggle) {
      var region = document.getElementById(toggle.dataset.fold);
      toggle.setAttribute("aria-expanded", region && !region.hidden && region.childElementCount ? "true" : "false");
    });
  });

  // What replaying workflows' steps does, for the ticked rows that are one (templates/dlq/_row.html's data-step;
  // one row's own Replay says it with console/domain/saga.py's words).
  function stepWords(ticked) {
    var steps = ticked.filter(function (box) { return box.dataset.step; });
    if (!steps.length) return "";
    var undo = steps.filter(function (box) { return box.dataset.step === "undo"; }).length;
    var one = ticked.length === 1, all = steps.length === ticked.length;
    var who = one ? "It is" : all ? "All " + steps.length + " are"
      : steps.length === 1 ? "One is" : steps.length + " are";
    var words = " " + who + (steps.length === 1 ? " a step of a workflow: a replay runs it alone"
      : " steps of workflows: a replay runs each alone") + ", and its workflow does not go on from it.";
    if (undo) {
      words += " " + (one ? "It" : undo === 1 ? "One of them" : undo + " of them") + " had succeeded and "
        + (undo === 1 ? "its undo failed: a replay runs that step again, not its undo."
          : "their undo failed: a replay runs those steps again, not their undo.");
    }
    return words;
  }

  // Letters that failed for good (non-retryable, needing a person) run the same input through the same code again,
  // as a single letter's Replay and a group's replay page say.
  function finalWords(ticked) {
    var final = ticked.filter(function (box) { return box.dataset.final !== undefined; }).length;
    if (!final) return "";
    return " " + (final === ticked.length ? (final === 1 ? "It" : "All of them") : final === 1 ? "One of them"
      : final + " of them") +
      " failed for good, not by running out of retries: unless " + (final === 1 ? "its cause was fixed, it fails"
        : "their cause was fixed, they fail") + " again.";
  }

  // "Replay selected" and "Discard selected" ask about the rows ticked: how many, and which params fixes waiting for
  // approval on them the action closes. With none ticked they ask nothing: the server says what to tick.
  document.addEventListener("htmx:confirm", function (event) {
    var button = event.detail.elt;
    if (!button.dataset || button.dataset.confirmSelected === undefined) return;
    var ticked = Array.prototype.filter.call(button.form.elements, function (box) {
      return box.name === "id" && box.checked;
    });
    if (!ticked.length) return;
    // A field the action needs left blank (a discard's reason): no question first, the server says what to fill in.
    var needs = button.dataset.needs && button.form.elements[button.dataset.needs];
    if (needs && !needs.value.trim()) return;
    var fixes = ticked.map(function (box) { return Number(box.dataset.fix); }).filter(Boolean)
      .sort(function (a, b) { return a - b; });
    // Past the discard limit the button files a request (a second person approves), and asks as such.
    var asks = button.dataset.requestAbove && ticked.length > Number(button.dataset.requestAbove)
      ? button.dataset.confirmRequest : button.dataset.confirmSelected;
    var question = asks.replace("{selected}", ticked.length === 1
      ? "the selected dead letter" : "the " + ticked.length + " selected dead letters")
      .replace("{They}", ticked.length === 1 ? "It" : "They");
    if (fixes.length === 1) question += " Params fix #" + fixes[0] + " waiting for approval is closed then.";
    if (fixes.length > 1) question += " Params fixes #" + fixes.join(", #") + " waiting for approval are closed then.";
    if (button.dataset.confirmSteps !== undefined) question += stepWords(ticked) + finalWords(ticked);
    event.preventDefault();
    if (window.confirm(question)) event.detail.issueRequest(true);
  });

  // A bulk action tried again clears what the last try said above the list: an old "a reason is required" stayed
  // beside "Discarded 1 dead letter."
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (!event.detail.elt.closest || !event.detail.elt.closest("#dlq-bulk")) return;
    document.querySelectorAll("#bulk-area .dlq-notice").forEach(function (notice) { notice.remove(); });
  });

  // A row's Replay or Discard refreshes the DLQ's count and, with it, the bulk bar (its "Replay all N matching"):
  // what the person set there stays. A rate of 7 went back to 50 and a typed reason was emptied, so the next
  // "Replay selected" ran at 50 while its question said "at the rate set here".
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var old = event.detail.target;  // a form: its .id would be its inputs named "id"
    if (!old || old.getAttribute("id") !== "dlq-bulk") return;
    event.detail.fragment.querySelectorAll("input[name]:not([type=hidden])").forEach(function (input) {
      var was = old.querySelector('input[name="' + input.name + '"]');
      if (!was) return;
      if (input.type === "checkbox") input.checked = was.checked;
      else input.value = was.value;
    });
  });

  // A bulk replay's start and end are said once (its panel's data-said, into #bulk-said), not every second's count.
  var bulkSaid = {};
  document.addEventListener("htmx:afterSettle", function () {
    var region = document.getElementById("bulk-said");
    if (!region) return;
    document.querySelectorAll(".bulk-progress[data-said]").forEach(function (panel) {
      var id = panel.getAttribute("id"), said = panel.dataset.said;
      if (bulkSaid[id] === said) return;
      region.textContent = said;
      bulkSaid[id] = said;
    });
  });
  document.addEventListener("DOMContentLoaded", function () {  // the panels the page came with are not news
    document.querySelectorAll(".bulk-progress[data-said]").forEach(function (panel) {
      bulkSaid[panel.getAttribute("id")] = panel.dataset.said;
    });
  });

  // A filter form's answer replaces the results below it, not the form: the fields it refused are marked here, and
  // unmarked once an answer refuses none (a screen reader heard the alert, but no field said it was the one).
  function markRefusedFields() {
    var said = document.getElementById("filter-error");
    var refused = said ? said.dataset.invalidFields.split(" ") : [];
    document.querySelectorAll("form.filters [name]").forEach(function (field) {
      if (refused.indexOf(field.name) >= 0) {
        field.setAttribute("aria-invalid", "true");
        field.setAttribute("aria-describedby", "filter-error");
      } else if (field.getAttribute("aria-describedby") === "filter-error") {
        field.removeAttribute("aria-invalid");
        field.removeAttribute("aria-describedby");
      }
    });
  }
  document.addEventListener("htmx:afterSettle", markRefusedFields);
  document.addEventListener("DOMContentLoaded", markRefusedFields);  // a refused filter's address, reloaded or shared

  // A "select all" box ticks every box its data-check-all selector names.
  document.addEventListener("change", function (event) {
    var all = event.target.closest("[data-check-all]");
    if (all) document.querySelectorAll(all.dataset.checkAll).forEach(function (box) { box.checked = all.checked; });
    var auto = event.target.closest("[data-autosubmit]");
    if (auto) auto.form.requestSubmit();
    // A task is one tenant's: choosing another tenant lets go of it, or Show would ask for the two at once.
    if (event.target.matches("select[name=tenant]") && event.target.form) {
      var task = event.target.form.querySelector("select[name=task]");
      var picked = task && task.selectedOptions[0];
      if (picked && picked.dataset.tenant && event.target.value && picked.dataset.tenant !== event.target.value) {
        task.value = "";
      }
    }
  });

  // A swap keeps the keyboard's place. A live region refreshing itself, or a row answering its own button, replaced
  // the element that had focus and left focus on <body>: a keyboard user could not reach the overview's cards, and
  // lost their place after each action. Before a swap that replaces the focused element, note what it was; after,
  // focus the first field the answer marks invalid, else the element's twin in the new content (same id, else same
  // link, else same kind, name and words), else the answer's alert or notice, else the nearest neighbour it had in its
  // region that is still there, else that region itself.
  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  var lostFocus = null, settled = [];

  function focusKey(element) {
    if (element.id) return "#" + element.id;
    if (element.hasAttribute("href")) return "href " + element.getAttribute("href");
    return [element.tagName, element.name || "", element.value || "", element.textContent.trim()].join(" ");
  }

  function focusables(scope) {
    var found = Array.prototype.slice.call(scope.querySelectorAll(FOCUSABLE));
    return scope.matches(FOCUSABLE) ? [scope].concat(found) : found;
  }

  function firstIn(scopes, selector) {
    for (var i = 0; i < scopes.length; i++) {
      var found = scopes[i].matches(selector) ? scopes[i] : scopes[i].querySelector(selector);
      if (found) return found;
    }
    return null;
  }

  // A live region reading itself again (hx-trigger "every …") that finds nothing new is left as it is: swapping in an
  // equal copy folded the traceback being read on a run's page every 2 s, and focus moved to the copy of its control,
  // which a screen reader announced again each time (helper 117). When it did change, the tracebacks that were open
  // stay open, and an action's answer (data-notices: "Asked run #4053 to stop") is carried into the new copy.
  var lastRead = {}, carried = null;

  function polled(event) {
    var elt = event.detail.elt;
    return elt === event.detail.target && /\bevery\b/.test(elt.getAttribute("hx-trigger") || "");
  }

  // An answer htmx does not swap (a 5xx: the database or Redis did not answer, a fault), or none at all, is said above
  // the page: a press on Replay during a Redis incident did nothing visible, as if it had worked. A live region's own
  // reads are left out: they try again by themselves.
  function sayNotDone(text) {
    var flashes = document.getElementById("flashes");
    if (!flashes) return;
    var said = document.getElementById("not-done") || document.createElement("div");
    said.id = "not-done";
    said.className = "flash error";
    said.setAttribute("role", "alert");
    said.textContent = text;
    flashes.prepend(said);
  }

  function answerDetail(xhr) {
    try {
      if (/json/.test(xhr.getResponseHeader("Content-Type") || "")) return JSON.parse(xhr.responseText).detail || "";
      var found = new DOMParser().parseFromString(xhr.responseText, "text/html").querySelector(".error-panel p");
      return found ? found.textContent.trim() : "";
    } catch (unreadable) {
      return "";
    }
  }

  document.addEventListener("htmx:responseError", function (event) {
    if (polled(event)) return;
    var detail = answerDetail(event.detail.xhr);
    sayNotDone("That did not go through (" + event.detail.xhr.status + "): " +
               (detail || "reload the page to see where things stand."));
  });
  document.addEventListener("htmx:sendError", function (event) {
    if (polled(event)) return;
    sayNotDone("The console did not answer, so that did not go through: check that it is running, then try again.");
  });
  // htmx tells of an answer on the element that asked; a live region's refresh may have replaced it meanwhile (a
  // Cancel that waited 10 s on a locked database), and then nothing reached the listeners above: the person was told
  // nothing (helper 162). The request itself still ends, so a person's own one is followed to its end.
  document.addEventListener("htmx:beforeOnLoad", function (event) {
    event.detail.xhr.reboundHeard = true;  // htmx handles this answer where the page hears it: said above, if need be
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (polled(event)) return;
    var elt = event.detail.elt, xhr = event.detail.xhr;
    xhr.addEventListener("loadend", function () {
      // Heard, or its element still on the page: the listeners above said it (its own swap may have replaced it).
      if (xhr.reboundHeard || elt.isConnected) return;
      if (xhr.status === 0) {
        sayNotDone("The console did not answer, so that did not go through: check that it is running, then try again.");
      } else if (xhr.status >= 400) {
        sayNotDone("That did not go through (" + xhr.status + "): " +
                   (answerDetail(xhr) || "reload the page to see where things stand."));
      }
    });
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    // A refusal is said above the page (the server retargets it there); a live region's own read tries again by
    // itself, so its refusal is not said every ten seconds.
    var refusal = event.detail.xhr.getResponseHeader("HX-Retarget") === "#flashes" && event.detail.xhr.status >= 400;
    // A poll has no triggering event; a person's press or submit has one, also in a region that polls (a Runs
    // filter's refusal was dropped as if it were the list's own refresh: helper 157).
    var asked = event.detail.requestConfig && event.detail.requestConfig.triggeringEvent;
    if (refusal && !asked && /\bevery\b/.test(event.detail.elt.getAttribute("hx-trigger") || "")) {
      event.detail.shouldSwap = false;
      return;
    }
    if (!event.detail.shouldSwap || !polled(event)) return;
    var region = event.detail.target, id = region.getAttribute("id");
    var read = event.detail.serverResponse.replace(/name="csrf_token" value="[^"]*"/g, "");  // signed anew each time
    if (id && lastRead[id] === read) {
      event.detail.shouldSwap = false;
      return;
    }
    lastRead[id] = read;
    var slot = region.querySelector("[data-notices]");
    carried = {
      id: id,
      notices: slot ? Array.prototype.slice.call(slot.children) : [],
      open: Array.prototype.map.call(region.querySelectorAll("details[open] > summary"), function (summary) {
        return summary.textContent.trim();
      })
    };
  });

  document.addEventListener("htmx:afterSwap", function () {
    var was = carried, region = was && document.getElementById(was.id);
    carried = null;
    if (!region) return;
    var slot = region.querySelector("[data-notices]");
    if (slot && !slot.children.length) was.notices.forEach(function (notice) { slot.appendChild(notice); });
    region.querySelectorAll("details > summary").forEach(function (summary) {
      if (was.open.indexOf(summary.textContent.trim()) >= 0) summary.parentNode.open = true;
    });
  });

  // Only a swap that takes the focused element notes it: another swap meanwhile (the count a row's answer asks to
  // refresh) must not forget it.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var active = document.activeElement, target = event.detail.target;
    if (!event.detail.shouldSwap || !active || active === document.body || !target || !target.contains(active)) return;
    var around = keyed(focusables(target));
    var at = around.findIndex(function (mark) { return mark.element === active; });
    if (at < 0) { around = keyed([active]); at = 0; }  // focused by script, not in the keyboard's order
    lostFocus = {key: around[at].key, nth: around[at].nth, around: around, at: at, region: target,
                 regionId: target.getAttribute("id"), polled: polled(event), top: active.getBoundingClientRect().top};
  });

  // Each focusable's key and its place among those of the same key (a row's "Replay" is one of many).
  function keyed(elements) {
    var seen = {};
    return elements.map(function (element) {
      var key = focusKey(element);
      seen[key] = (seen[key] || 0) + 1;
      return {element: element, key: key, nth: seen[key] - 1};
    });
  }

  // The region's focusables by key, read once: `twin(mark)` finds a lost element's twin among them.
  function twinsIn(scope) {
    var byKey = {};
    keyed(focusables(scope)).forEach(function (mark) { (byKey[mark.key] = byKey[mark.key] || []).push(mark.element); });
    return function (mark) { return (byKey[mark.key] || [])[mark.nth] || null; };
  }

  // The region the person was in, as it is now: the target itself after an inner swap, else what replaced it (same
  // id). Not simply the first thing swapped: every live region sends the nav's counts out of band first, and focus
  // landed on a count in the top bar, the page scrolled to the top, when the focused run was pushed off the list.
  function regionNow(lost, scopes) {
    if (lost.region.isConnected) return lost.region;
    return (lost.regionId && document.getElementById(lost.regionId)) || scopes[scopes.length - 1];
  }

  // The focusable nearest the lost one that the new content still has: new runs arriving on top push those below it
  // off the page, so at each distance the one above is tried first.
  function nearestNeighbour(lost, region) {
    var twin = twinsIn(region);
    for (var distance = 1; distance < lost.around.length; distance++) {
      var above = lost.around[lost.at - distance], below = lost.around[lost.at + distance];
      var found = (above && twin(above)) || (below && twin(below));
      if (found) return found;
    }
    return null;
  }

  function restoreFocus() {
    var lost = lostFocus, scopes = settled.filter(function (e) { return e.isConnected; });
    lostFocus = null;
    settled = [];
    if (!lost || !scopes.length || (document.activeElement && document.activeElement !== document.body)) return;
    var invalid = firstIn(scopes, '[aria-invalid="true"]');
    if (invalid) { invalid.focus(); return; }
    var twins = [];
    scopes.forEach(function (scope) {
      twins = twins.concat(focusables(scope).filter(function (e) { return focusKey(e) === lost.key; }));
    });
    var next = twins[Math.min(lost.nth, twins.length - 1)];
    if (next) { next.focus({preventScroll: true}); keepInPlace(lost, next); return; }
    // A live region reading itself again says nothing to the person: its alerts are not an answer to them.
    next = !lost.polled && firstIn(scopes, '[role="alert"], [role="status"]');
    if (next) {
      if (!next.matches(FOCUSABLE)) next.setAttribute("tabindex", "-1");
      next.focus();
      return;
    }
    var region = regionNow(lost, scopes);
    next = nearestNeighbour(lost, region) || region;
    if (!next.matches(FOCUSABLE)) next.setAttribute("tabindex", "-1");
    next.focus({preventScroll: true});  // where the person was reading: the page stays where it was
    keepInPlace(lost, next);
  }

  // A refresh the person did not ask for leaves what they have focus on where it was on the screen: ten new runs on
  // top of the list pushed the focused row below the window (helper 141), as scroll anchoring would have kept it.
  function keepInPlace(lost, element) {
    if (!lost.polled) return;
    var moved = element.getBoundingClientRect().top - lost.top;
    if (Math.abs(moved) > 1) window.scrollBy(0, moved);
  }

  // htmx settles each new top-level element apart, one after another in the swap's own task (settle delay 0, in the
  // htmx config): gather them, then look once, before that task ends. A timer let the Overview's charts redraw first,
  // and for up to 0.85 s the keys a person pressed went to <body> (helper 168).
  document.addEventListener("htmx:afterSettle", function (event) {
    if (!lostFocus) return;
    settled.push(event.target);
    if (settled.length === 1) window.queueMicrotask(restoreFocus);
  });

  // A table's frame scrolls sideways only when its table is wider than it (a phone): a frame that scrolls is where
  // its headers stick, and with no height of its own it never scrolls down, so on a long list they went up with the
  // page. A frame its table fits is marked .fits and clips instead (console.css), and the headers stick to the
  // window. Marked at once when the page or a swap is ready (an observer's first report waits for the browser's next
  // frame, which a busy browser renders after the page's load), then watched for size (a window resized, rows added in
  // place, local times rewritten).
  function markFrame(frame) { frame.classList.toggle("fits", frame.scrollWidth <= frame.clientWidth); }
  var frames = new ResizeObserver(function (entries) {
    entries.forEach(function (entry) {
      var frame = entry.target.closest(".table-wrap");
      if (frame) markFrame(frame);
    });
  });
  function watchFrames() {
    frames.disconnect();  // the frames a swap took away are let go
    document.querySelectorAll(".table-wrap").forEach(function (frame) {
      markFrame(frame);
      frames.observe(frame);
      Array.prototype.forEach.call(frame.children, function (child) { frames.observe(child); });
    });
  }
  document.addEventListener("DOMContentLoaded", watchFrames);
  document.addEventListener("htmx:afterSwap", watchFrames);

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
