// intend console: progressive enhancement only; every page works without it.
// A section with data-events listens to the page's server-sent events and
// updates its fields (data-field names a path in the event's JSON). A run's
// page says when the run ended; an instance's page (data-version) says
// when the instance moved past the version it shows.
(function () {
  "use strict";
  var box = document.querySelector("[data-events]");
  if (!box || !window.EventSource) { return; }
  var live = box.querySelector("[data-live]");
  if (live && live.getAttribute("data-live") === "done") { return; }
  var moved = box.querySelector("[data-moved]");
  var shown = box.getAttribute("data-version");
  var src = new EventSource(box.getAttribute("data-events"));
  function get(obj, path) {
    return path.split(".").reduce(function (o, k) { return o == null ? o : o[k]; }, obj);
  }
  src.addEventListener("progress", function (e) {
    var d = JSON.parse(e.data);
    box.querySelectorAll("[data-field]").forEach(function (el) {
      var v = get(d, el.getAttribute("data-field"));
      if (v === null || v === undefined) { v = "—"; }
      if (el.tagName === "PROGRESS") { el.value = v; el.textContent = v + "%"; } else { el.textContent = String(v); }
    });
    if (moved && shown && d.version !== undefined && String(d.version) !== shown) { moved.hidden = false; }
    if (box.hasAttribute("data-follow") && d.follow) { src.close(); window.location.assign(d.follow); }
    if (box.hasAttribute("data-follow") && d.nothing && live) {
      src.close(); live.setAttribute("data-live", "done"); live.textContent = "The scheduler took it: there was nothing to do.";
    }
  });
  src.addEventListener("end", function () {
    src.close();
    if (live && !box.hasAttribute("data-follow")) { live.setAttribute("data-live", "done"); live.textContent = "The run has ended."; }
  });
  src.addEventListener("failure", function (e) {
    src.close();
    if (live) { live.textContent = "Live updates stopped: " + JSON.parse(e.data) + ". Reload the page."; }
  });
}());
