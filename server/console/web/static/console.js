// Shale console: optional auto-refresh of the page, remembered in localStorage.
(function () {
  "use strict";
  var box = document.getElementById("autorefresh");
  if (!box) { return; }
  var key = "shale.console.autorefresh";
  var timer = null;
  function arm() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (box.checked) {
      // A page with a form being filled in is not reloaded under the user's hands.
      timer = setTimeout(function () {
        var active = document.activeElement;
        if (active && (active.tagName === "INPUT" || active.tagName === "TEXTAREA" || active.tagName === "SELECT")) { arm(); return; }
        window.location.reload();
      }, 10000);
    }
  }
  try { box.checked = window.localStorage.getItem(key) === "1"; } catch (e) { box.checked = false; }
  box.addEventListener("change", function () {
    try { window.localStorage.setItem(key, box.checked ? "1" : "0"); } catch (e) { /* private mode */ }
    arm();
  });
  arm();
}());
