// Adjudication page: after "Take A's scores" the page opens on the prefilled final-grade form, which sits
// below the two grades. Bring it into view, focus its first field and mark it, so the lead sees that
// something changed (the link's #fragment already scrolls there without JavaScript).
(function () {
  "use strict";

  function taken() { return document.querySelector("details.grading-taken"); }

  function mark() {
    const form = taken();
    if (!form) return;
    form.open = true;
    form.classList.add("grading-taken-cue");
  }

  function focusForm() {
    // After the load: the browser's own scroll to the #fragment moves the focus to the page, so focusing
    // earlier would be undone.
    const form = taken();
    if (!form) return;
    form.scrollIntoView({ block: "start", behavior: "instant" });
    // the taken grade's own choice (its checked radio), else the first field
    const field = form.querySelector("input:checked") || form.querySelector("input:not([type=hidden]), textarea");
    if (field) field.focus({ preventScroll: true });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", mark);
  } else {
    mark();
  }
  if (document.readyState === "complete") {
    focusForm();
  } else {
    window.addEventListener("load", function () { window.setTimeout(focusForm, 0); });
  }
})();
