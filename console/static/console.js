// intend console: progressive enhancement only; every page works without it.
// A section with data-run-events listens to the run's server-sent events
// and updates its fields (data-field names a path in the event's JSON).
(function () {
  "use strict";
  var box = document.querySelector("[data-run-events]");
  if (!box || !window.EventSource) { return; }
  var live = box.querySelector("[data-live]");
  if (live && live.getAttribute("data-live") === "done") { return; }
  var src = new EventSource(box.getAttribute("data-run-events"));
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
  });
  src.addEventListener("end", function () {
    src.close();
    if (live) { live.setAttribute("data-live", "done"); live.textContent = "The run has ended."; }
  });
  src.addEventListener("failure", function (e) {
    src.close();
    if (live) { live.textContent = "Live updates stopped: " + JSON.parse(e.data) + ". Reload the page."; }
  });
}());
