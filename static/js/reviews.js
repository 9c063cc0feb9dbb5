// Weekly draft-vs-sent review: j/k move between pairs, 1..n give a verdict, n opens the notes,
// and "One pair at a time" shows only the current pair (remembered in this browser).
// A verdict key saves the pair and keeps it current (j moves on): "3, then n to say why" must put the
// note on the pair just judged, never on the next one. A note typed while the save is in flight
// survives the swap of the pair (value, caret and focus are carried over to the new form).
(() => {
  const MODE_KEY = "draftdesk.reviews.oneAtATime";
  let current = 0;
  let typing = null; // the notes being typed in a pair that an htmx swap replaces: {id, value, caret}

  const items = () => Array.from(document.querySelectorAll("#reviews-pairs .reviews-item"));

  function show(index, scroll = true) {
    const all = items();
    if (!all.length) return;
    current = Math.max(0, Math.min(index, all.length - 1));
    all.forEach((el, i) => el.classList.toggle("reviews-current", i === current));
    if (scroll) all[current].scrollIntoView({ block: "start", behavior: "instant" });
  }

  function setOneAtATime(on) {
    const pairs = document.getElementById("reviews-pairs");
    const button = document.getElementById("reviews-one-at-a-time");
    if (!pairs || !button) return;
    pairs.classList.toggle("reviews-one", on);
    button.setAttribute("aria-pressed", on ? "true" : "false");
    window.localStorage.setItem(MODE_KEY, on ? "1" : "0");
  }

  function verdict(n) {
    const item = items()[current];
    if (!item) return;
    const radios = item.querySelectorAll("input[name=verdict]");
    if (n < 1 || n > radios.length) return;
    radios[n - 1].checked = true;
    item.querySelector("form[hx-post$='/verdict']").requestSubmit();
  }

  document.addEventListener("DOMContentLoaded", () => {
    const button = document.getElementById("reviews-one-at-a-time");
    if (!button) return;
    button.addEventListener("click", () => setOneAtATime(button.getAttribute("aria-pressed") !== "true"));
    setOneAtATime(window.localStorage.getItem(MODE_KEY) === "1");
    const fromHash = items().findIndex((el) => "#" + el.id === window.location.hash);
    show(fromHash >= 0 ? fromHash : 0, fromHash >= 0);
  });

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const tag = (ev.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select") {
      if (ev.key === "Escape") ev.target.blur();
      return;
    }
    if (ev.key === "j") { show(current + 1); ev.preventDefault(); }
    else if (ev.key === "k") { show(current - 1); ev.preventDefault(); }
    else if (ev.key === "n") {
      const notes = items()[current]?.querySelector("input[name=notes]");
      if (notes) { notes.focus(); ev.preventDefault(); }
    } else if (/^[1-9]$/.test(ev.key)) { verdict(Number(ev.key)); ev.preventDefault(); }
  });

  // A saved verdict swaps the pair in place: remember notes being typed in it.
  document.addEventListener("htmx:beforeSwap", (ev) => {
    const target = ev.detail.target;
    const active = document.activeElement;
    if (target && target.classList?.contains("reviews-item") && active?.name === "notes" && target.contains(active)) {
      typing = { id: target.id, value: active.value, caret: active.selectionStart ?? active.value.length };
    }
  });

  // Give back the notes being typed, on the same pair, as soon as the new pair is in the page (afterSwap runs
  // in the swap's own task: no keystroke can land on the page body between the swap and the focus).
  document.addEventListener("htmx:afterSwap", () => {
    if (!typing) return;
    const notes = document.getElementById(typing.id)?.querySelector("input[name=notes]");
    if (notes) {
      notes.value = typing.value;
      notes.focus();
      notes.setSelectionRange(typing.caret, typing.caret);
    }
    typing = null;
  });

  // Keep the swapped pair current.
  document.addEventListener("htmx:afterSettle", () => {
    if (items().length) show(current, false);
  });
})();
