// Runs in linewise's private world of the observed document, whose globals page scripts
// cannot see or change: keeps each element the marking found under its bid, so that an
// action needing certainty (typing a secret) reaches that very element, and keeps the
// fields secrets were typed into (for the screenshot mask) across observations.
function (attribute) {
  const elements = new Map();
  const roots = [document];
  while (roots.length) {
    for (const el of roots.pop().querySelectorAll("*")) {
      const bid = el.getAttribute(attribute);
      if (bid !== null && !elements.has(bid)) elements.set(bid, el);
      if (el.shadowRoot) roots.push(el.shadowRoot);
    }
  }
  const previous = globalThis.__linewise;
  globalThis.__linewise = { elements, secretFields: previous ? previous.secretFields : new Set() };
  return elements.size;
}
