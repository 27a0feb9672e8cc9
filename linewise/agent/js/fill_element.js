// Fills `node` with `value` in one evaluation in the node's own document: Playwright's
// fill (the same element rules, retargeting and errors), except that the text is typed
// here, with the editing command a person's typing runs, and not sent to whatever has the
// focus afterwards (Playwright's fill focuses the field, then sends the text to the
// focused frame: a cross-origin frame that took the focus in between got it). Returns
// null when filled, else why not.
(node, value) => {
  let el = node;
  if (!el.matches("input, textarea, select") && !el.isContentEditable) {
    el = el.closest("button, [role=button], [role=checkbox], [role=radio]") || el;
  }
  if (!el.matches("a, input, textarea, button, select, [role=link], [role=button], "
                  + "[role=checkbox], [role=radio]") && !el.isContentEditable) {
    const label = el.closest("label");
    if (label && label.control) el = label.control;
  }
  if (!el.isConnected || el.ownerDocument !== document) {
    return "the element is no longer on the page";
  }
  const tag = el.nodeName.toLowerCase();
  if (tag === "input") {
    const type = el.type.toLowerCase();
    const setValue = ["color", "date", "time", "datetime-local", "month", "range", "week"];
    const typeInto = ["", "email", "number", "password", "search", "tel", "text", "url"];
    if (!typeInto.includes(type) && !setValue.includes(type)) {
      return `Input of type "${type}" cannot be filled`;
    }
    if (type === "number") {
      value = value.trim();
      if (isNaN(Number(value))) return "Cannot type text into input[type=number]";
    }
    if (setValue.includes(type)) {
      value = value.trim();
      el.focus();
      el.value = value;
      if (el.value !== value) return "Malformed value";
      el.dispatchEvent(new Event("input", { bubbles: true, composed: true }));
      el.dispatchEvent(new Event("change", { bubbles: true }));
      return null;
    }
  } else if (tag !== "textarea" && !el.isContentEditable) {
    return "Element is not an <input>, <textarea> or [contenteditable] element";
  }
  const field = tag === "input" || tag === "textarea";
  if (field) {
    if (tag === "input") {
      el.select();
    } else {
      el.selectionStart = 0;
      el.selectionEnd = el.value.length;
    }
    el.focus();
    if (el.getRootNode().activeElement !== el) return "the element did not take the focus";
  } else {
    const range = document.createRange();
    range.selectNodeContents(el);
    const selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    el.focus();
  }
  if (value === "" && (field ? el.value === "" : el.textContent === "")) return null;
  const typed = value === ""
    ? document.execCommand("delete", false)
    : document.execCommand("insertText", false, value);
  if (!typed) {
    // No editing command here (a field the command does not reach): set the value and
    // announce it, as a framework's listener expects.
    if (field) {
      const proto = tag === "input" ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
      Object.getOwnPropertyDescriptor(proto, "value").set.call(el, value);
    } else {
      el.textContent = value;
    }
    el.dispatchEvent(new Event("input", { bubbles: true, composed: true }));
    if (field) el.dispatchEvent(new Event("change", { bubbles: true }));
  }
  return null;
}
