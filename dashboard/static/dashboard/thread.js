// The thread page's small helpers (CSP: script-src 'self', so they live here, not inline).
// "Expand all" / "Collapse all" open or close every message of the list; a #m-<index> link opens its message.
document.documentElement.classList.add("js");
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-details]");
  if (!button) return;
  const open = button.dataset.details === "open";
  document.querySelectorAll(button.dataset.scope + " details").forEach((d) => { d.open = open; });
});
function openTarget() {
  const match = /^#m-\d+$/.test(location.hash) && document.querySelector(location.hash);
  if (match) { const d = match.querySelector("details"); if (d) d.open = true; match.scrollIntoView(); }
}
window.addEventListener("hashchange", openTarget);
document.addEventListener("DOMContentLoaded", openTarget);
