// Types a secret into the element observed as `bid`, in the same evaluation that checks
// the document is still the observed one at `origin` (this world dies with its document,
// so a navigated page or a popup cannot get here). Returns null when typed, else why not.
function (bid, value, origin, marker) {
  const state = globalThis.__linewise;
  if (!state) return "the page was not observed";
  const here = location.protocol + "//" + location.host;
  if (here !== origin) return `the page is now at ${here}, not the observed ${origin}`;
  const el = state.elements.get(bid);
  if (!el || !el.isConnected || el.ownerDocument !== document) {
    return `element ${bid} is no longer on the observed page`;
  }
  const tag = el.tagName.toLowerCase();
  const nonText = ["button", "checkbox", "radio", "submit", "reset", "file", "image",
                   "hidden", "range", "color"];
  const field = tag === "textarea" || (tag === "input" && !nonText.includes(el.type));
  if (!field && !el.isContentEditable) return `element ${bid} is not a text field`;
  if (el.disabled || el.readOnly) return `element ${bid} is disabled or read-only`;
  el.focus();
  try {
    if (field) {
      el.select();
    } else {
      const range = document.createRange();
      range.selectNodeContents(el);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
    }
  } catch (e) { /* some input types have no selection: the fallback below sets them */ }
  // execCommand types as a person's input does (beforeinput and input events that
  // frameworks listen to); where it cannot, the value is set and announced instead.
  const typed = document.execCommand("insertText", false, value);
  const now = field ? el.value : el.innerText;
  if (!typed || now !== value) {
    if (field) {
      const proto = tag === "input" ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
      Object.getOwnPropertyDescriptor(proto, "value").set.call(el, value);
      el.dispatchEvent(new Event("input", { bubbles: true }));
      el.dispatchEvent(new Event("change", { bubbles: true }));
    } else {
      el.textContent = value;
      el.dispatchEvent(new Event("input", { bubbles: true }));
    }
  }
  state.secretFields.add(el);
  el.setAttribute(marker, "");
  return null;
}
