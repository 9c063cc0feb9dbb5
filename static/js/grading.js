// Grading page: keyboard shortcuts for every score, save / save-and-next (htmx swaps the next item in),
// skip and previous by key, and a local copy of unsaved scores so a reload never loses a half-done grade.
// The item is swapped by htmx (and restored from history), so everything is looked up at the time of use.
(function () {
  "use strict";
  if (window.ddGradingLoaded) return; // a history restore re-inserts this script: bind once
  window.ddGradingLoaded = true;
  const fields = ["factual_accuracy", "citation_relevance", "tone", "completeness", "rationale", "unsupported_claim"];

  function gradingForm() { return document.getElementById("grading-form"); }
  function storeKey(form) { return "dd-grading-draft-" + form.dataset.draft; }

  function snapshot(form) {
    const data = {};
    for (const name of fields) {
      const el = form.elements.namedItem(name);
      if (!el) continue;
      data[name] = el.value !== undefined ? el.value : "";
    }
    return data;
  }

  function restore(form) {
    // A successful save clears the copy; an error answer already carries the values.
    if (form.dataset.saved === "1") { localStorage.removeItem(storeKey(form)); return; }
    if (document.getElementById("grading-error")) return;
    let data = null;
    try { data = JSON.parse(localStorage.getItem(storeKey(form)) || "null"); } catch (e) { data = null; }
    if (!data) return;
    for (const name of fields) {
      const value = data[name];
      if (!value) continue;
      const el = form.elements.namedItem(name);
      if (!el) continue;
      if (el instanceof RadioNodeList) {
        for (const r of el) r.checked = r.value === value;
      } else if (!el.value) {
        el.value = value;
      }
    }
  }

  function save(ev) {
    const form = ev.target.closest ? ev.target.closest("#grading-form") : null;
    if (form) localStorage.setItem(storeKey(form), JSON.stringify(snapshot(form)));
  }

  function submit(form, next) {
    // click() (not requestSubmit) so the browser validates and htmx sees which button was used.
    const button = form.querySelector('button[name="next"][value="' + (next ? "1" : "0") + '"]');
    button.click();
  }

  function openSkip() {
    const details = document.getElementById("grading-skip");
    if (!details) return;
    details.open = true;
    const first = details.querySelector("input[name=reason]");
    if (first) first.focus({ preventScroll: true });
    // The whole form, down to "Skip and next", must be on screen, not just its first reason.
    const button = details.querySelector("button[type=submit]");
    if (button) button.scrollIntoView({ block: "nearest", behavior: "instant" });
  }

  function focusAtEnd(el) {
    // N / C continue the text: the caret goes after what is already written, not before it.
    if (!el) return;
    el.focus();
    const end = el.value.length;
    el.setSelectionRange(end, end);
  }

  function setUp(root) {
    const form = root && root.querySelector ? root.querySelector("#grading-form") || (root.id === "grading-form" ? root : null) : null;
    if (form) restore(form);
  }

  // The "claim needed" mark goes once the claim is typed or the grade is no longer Fail.
  document.addEventListener("input", function (ev) {
    const box = ev.target && ev.target.closest ? ev.target.closest(".grading-claim-needed") : null;
    if (box) box.classList.remove("grading-claim-needed");
  });
  document.addEventListener("change", function (ev) {
    if (ev.target && ev.target.name === "factual_accuracy" && ev.target.value !== "fail") {
      document.querySelectorAll(".grading-claim-needed").forEach(function (el) { el.classList.remove("grading-claim-needed"); });
    }
  });
  document.addEventListener("input", save);
  document.addEventListener("change", save);
  document.addEventListener("htmx:beforeSwap", function (ev) {
    // The grade went in: forget the local copy of the item being replaced.
    const form = gradingForm();
    if (form && ev.detail.xhr && ev.detail.xhr.status < 300 && ev.detail.requestConfig && ev.detail.requestConfig.verb === "post") {
      const html = ev.detail.xhr.responseText || "";
      if (html.indexOf('id="grading-error"') === -1) localStorage.removeItem(storeKey(form));
    }
  });
  document.addEventListener("htmx:load", function (ev) { setUp(ev.detail.elt); });

  document.addEventListener("keydown", function (ev) {
    const form = gradingForm();
    const target = ev.target;
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") {
      const skipForm = target && target.closest ? target.closest("#grading-skip-form") : null;
      if (skipForm) { ev.preventDefault(); skipForm.querySelector("button[type=submit]").click(); return; }
      if (form) { ev.preventDefault(); submit(form, true); }
      return;
    }
    if ((ev.ctrlKey || ev.metaKey) && (ev.key === "s" || ev.key === "S")) {
      if (form) { ev.preventDefault(); submit(form, false); }
      return;
    }
    const typing = target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type === "text"));
    if (typing) {
      if (ev.key === "Escape") target.blur();
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (target && target.closest && target.closest("#grading-skip")) return; // arrows and space choose a reason
    const key = ev.key.toLowerCase();
    if (key === "k") { ev.preventDefault(); openSkip(); return; }
    if (key === "b") {
      const prev = document.getElementById("grading-previous");
      if (prev) { ev.preventDefault(); prev.click(); }
      return;
    }
    if (!form) return;
    if (key === "n") { ev.preventDefault(); focusAtEnd(form.elements.namedItem("rationale")); return; }
    if (key === "c") { ev.preventDefault(); focusAtEnd(form.elements.namedItem("unsupported_claim")); return; }
    const input = form.querySelector('input[data-key="' + CSS.escape(key) + '"]');
    if (!input) return;
    ev.preventDefault();
    input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
    if (input.name === "factual_accuracy" && input.value === "fail") {
      const claim = form.elements.namedItem("unsupported_claim");
      const selection = String(window.getSelection ? window.getSelection() : "").trim();
      const draftText = document.getElementById("grading-draft-text");
      if (selection && draftText && draftText.textContent.includes(selection)) {
        claim.value = selection;
        claim.dispatchEvent(new Event("input", { bubbles: true }));
      } else if (claim && !claim.value) {
        // Nothing selected: mark the claim box but leave the focus where it is, so the next score
        // keys still score (focusing the box sent them into the quote). C or a click types in it.
        claim.closest(".grading-claim").classList.add("grading-claim-needed");
      }
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { setUp(document); });
  } else {
    setUp(document);
  }
})();
