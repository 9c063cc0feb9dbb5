// Grading page: keyboard shortcuts for every score, save / save-and-next, and a local copy of
// unsaved scores so a reload or an expired session never loses a half-done grade.
(function () {
  "use strict";
  const form = document.getElementById("grading-form");
  if (!form) return;
  const storeKey = "dd-grading-draft-" + form.dataset.draft;
  const fields = ["factual_accuracy", "citation_relevance", "tone", "completeness", "rationale", "unsupported_claim"];

  function snapshot() {
    const data = {};
    for (const name of fields) {
      const el = form.elements.namedItem(name);
      if (!el) continue;
      data[name] = el.value !== undefined ? el.value : "";
    }
    return data;
  }

  function restore() {
    // A successful save (flash shown) clears the copy; an error page already carries the values.
    if (form.dataset.saved === "1") { localStorage.removeItem(storeKey); return; }
    if (document.getElementById("grading-error")) return;
    let data = null;
    try { data = JSON.parse(localStorage.getItem(storeKey) || "null"); } catch (e) { data = null; }
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

  function save() { localStorage.setItem(storeKey, JSON.stringify(snapshot())); }

  function submit(next) {
    const button = form.querySelector('button[name="next"][value="' + (next ? "1" : "0") + '"]');
    if (typeof form.requestSubmit === "function") form.requestSubmit(button); else button.click();
  }

  const byKey = {};
  for (const input of form.querySelectorAll("input[data-key]")) byKey[input.dataset.key] = input;

  form.addEventListener("input", save);
  form.addEventListener("change", save);

  document.addEventListener("keydown", function (ev) {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") { ev.preventDefault(); submit(true); return; }
    if ((ev.ctrlKey || ev.metaKey) && (ev.key === "s" || ev.key === "S")) { ev.preventDefault(); submit(false); return; }
    const target = ev.target;
    const typing = target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type === "text"));
    if (typing) {
      if (ev.key === "Escape") target.blur();
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const input = byKey[ev.key.toLowerCase()];
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
        save();
      } else if (claim && !claim.value) {
        claim.focus();
      }
    }
  });

  restore();
})();
