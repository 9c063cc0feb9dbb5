// Adjudication page: after "Take A's scores" the page opens on the prefilled final-grade form, which sits
// below the two grades. Bring it into view, focus its first field and flash a cue, so the lead sees that
// something changed (the link's #fragment already scrolls there without JavaScript).
(function () {
  "use strict";

  function showTaken() {
    const form = document.querySelector("details.grading-taken");
    if (!form) return;
    form.open = true;
    form.scrollIntoView({ block: "start", behavior: "instant" });
    const field = form.querySelector("input:checked, input:not([type=hidden]), textarea");
    if (field) field.focus({ preventScroll: true });
    form.classList.add("grading-taken-cue");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", showTaken);
  } else {
    showTaken();
  }
})();
